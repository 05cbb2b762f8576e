import AccountStoreCore
import Foundation

/// Changes asked for by a person or found by a check: each is written to the store first, and
/// applied to the account's current state only once the store agreed, as the change alone.
extension AccountSession {
    /// A new login replaced the session in the store (same id): use its record and tokens now.
    func signedIn(_ record: AccountRecord, secrets: AccountSecrets) {
        apply(.signedIn(record))
        cache(secrets, version: record.secretsVersion)
        warnedSessionEnd = false
    }

    /// The store made this account the default (or another one): the flag follows.
    func defaultChanged(_ isDefault: Bool) {
        apply(.defaultChanged(isDefault, at: environment.now()))
    }

    /// Saves and applies what the DID document now says: the handle (naming the account only
    /// if verified) and, when it moved, the PDS. The saved record is built from the current
    /// state, and the change is applied to the state as it is once the write returns.
    func adoptIdentity(handle: String?, handleVerified: Bool, pds: String?) async throws(StoreError) {
        var identity = state.record
        identity.handle = handle
        identity.handleVerified = handleVerified
        if let pds { identity.pds = pds }
        identity.updatedAt = environment.now()
        do {
            try await environment.store.saveIdentity(identity)
        } catch .recordAltered {
            await markAltered()
            throw .recordAltered(account: id)
        }
        let oldHandle = state.record.handle
        apply(.identityResolved(handle: handle, verified: handleVerified, pds: pds, at: identity.updatedAt))
        if let pds {
            logger.notice("the account moved to another PDS", metadata: ["pds": "\(pds)", "outcome": "pds-moved"])
        }
        if handle?.lowercased() != oldHandle?.lowercased() || handleVerified {
            logger.info("the account's handle, from its DID document", metadata: [
                "handle": "\(handle ?? "-")", "handleVerified": "\(handleVerified)",
            ])
        }
    }

    /// The account's session cannot follow it to its new PDS: it needs a new login. Nothing is
    /// marked when the session changed meanwhile (a new login replaced it in place).
    func markMovedAway(from checked: AccountRecord, reason: String, detail: String) async {
        let record = state.record
        guard record.pds == checked.pds, record.oauth?.issuer == checked.oauth?.issuer, record.state != .needsLogin else { return }
        let (version, at) = (record.secretsVersion, environment.now())
        do {
            // Over these tokens only: newer ones (a login elsewhere) are not marked.
            try await environment.store.markState(id: id, state: .needsLogin, reason: reason, at: at, lease: .keep,
                                                  ifVersion: version)
        } catch .tokensSuperseded {
            logger.info("newer tokens were stored meanwhile (a new login): the account is not marked")
            return
        } catch {
            logger.error("cannot save the account's state", metadata: ["error": "\(error)"])
            return
        }
        apply(.movedAway(reason: reason, version: version, at: at))
        logger.error("the account moved where its session cannot follow; it needs a new login", metadata: [
            "outcome": "needs-login", "reason": "\(detail)",
        ])
    }

    /// Keeps `profile` (saved, then published by the record's change when more than its fetch
    /// date changed); a store that refuses it leaves it in memory until the next fetch.
    func adoptProfile(_ profile: AccountProfile) async {
        do {
            try await environment.store.setProfile(id: id, profile, at: environment.now())
        } catch {
            logger.warning("cannot save the account's profile", metadata: ["error": "\(error)"])
        }
        apply(.profileFetched(profile))
    }

    /// New timing rules (a reload): the account's date is worked out again.
    func retime() {
        apply(.retimed)
    }
}
