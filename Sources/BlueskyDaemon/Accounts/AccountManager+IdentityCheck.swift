import ATIdentity
import ATOAuth
import ATSyntax
import BlueskyStore
import Foundation

/// Accounts move between PDSes and change handles. The DID document is the truth: it is looked
/// at again every 6 hours (at a scheduled refresh; an hourly look at 100,000 accounts would be
/// 28 directory requests a second), and at once when a PDS refuses a token that was
/// just refreshed. A new handle names the account only once verified both ways; a new PDS is
/// used only when, for OAuth accounts, its authorization server is the one that granted the
/// session (else the account needs a new login, with that reason).
extension AccountManager {
    static let identityRecheckInterval: TimeInterval = 6 * 3600
    /// However many calls a PDS refuses, the DID document is read again at most this often.
    static let refusedCallRecheckInterval: TimeInterval = 60

    /// A loaded account's "last checked" date, at random within the interval, so that a restart
    /// spreads the next checks out instead of reading every DID document at once. Never within
    /// the last minute: that would also hold back a refused call's recheck.
    static func seededIdentityCheck(now: Date) -> Date {
        now.addingTimeInterval(-Jitter.uniform(in: refusedCallRecheckInterval..<identityRecheckInterval))
    }

    /// Rechecks the identity when the last check is older than the interval, or at once when the
    /// PDS reported a handle not yet verified; off the caller's path (a scheduled refresh must
    /// not hold its slot through directory timeouts).
    func recheckIdentityIfDue(of session: AccountSession) async {
        guard await session.identityCheckDue(interval: Self.identityRecheckInterval) else { return }
        // When enough run already, this one stays due and starts after a later refresh.
        backgroundChecks.start {
            await session.sharedIdentityCheck(minimumInterval: 0) { await self.recheckIdentity(of: session) }
            // The profile is looked at as often as the identity (a person may rename anywhere).
            await self.refreshProfile(of: session)
        }
    }

    /// After a PDS refused a just-refreshed token: one shared recheck at most a minute, then
    /// whether the account's PDS is no longer `used` (the call should go to the new one).
    /// - Throws: `NeedsLogin` when the recheck found the session cannot follow the account.
    func pdsChanged(of session: AccountSession, from used: URL) async throws(DaemonError) -> Bool {
        await session.sharedIdentityCheck(minimumInterval: Self.refusedCallRecheckInterval) {
            await self.recheckIdentity(of: session)
        }
        try await session.requireUsable()
        return await session.pdsURL.map { Self.origin($0.absoluteString) != Self.origin(used.absoluteString) } ?? false
    }

    /// Resolves the account's DID afresh and brings its handle and PDS up to date; when the
    /// document cannot be read, or a server is down, nothing changes.
    func recheckIdentity(of session: AccountSession) async {
        let record = await session.record
        await session.noteIdentityChecked()
        guard let did = DID(record.did) else { return }
        identity.invalidate(.did(did))
        // The handle's answer may have changed too (taken by another DID).
        if let handle = record.handle.flatMap(Handle.init) { identity.invalidate(.handle(handle)) }
        let resolved: ResolvedIdentity
        do {
            resolved = try await identity.resolve(.did(did))
        } catch {
            logger.notice("could not recheck the account's identity", metadata: [
                "account": "\(record.id.uuidString.lowercased())", "did": "\(record.did)", "reason": "\(error)",
            ])
            return
        }
        let pds = resolved.pds.absoluteString
        let pdsMoved = Self.origin(pds) != Self.origin(record.pds)
        if pdsMoved, record.authKind == .appPassword {
            // An app password's session belongs to the PDS that issued it; the new one never did.
            await session.markMovedAway(from: record, reason: "moved to \(pds); log in again", detail: "moved to \(pds)")
            return
        }
        if pdsMoved, let issuer = record.oauth?.issuer {
            do {
                _ = try await checkIssuerBinding(did: record.did, issuer: issuer)
            } catch .oauthLogin(let verdict) where verdict.isIssuerVerdict {
                let reason = "the account moved to \(pds), whose authorization server did not grant this session; log in again"
                await session.markMovedAway(from: record, reason: reason, detail: verdict.message)
                return
            } catch {
                // The new PDS or the directory is down: that says nothing about the session.
                logger.notice("could not check the authorization server of the account's new PDS", metadata: [
                    "account": "\(record.id.uuidString.lowercased())", "pds": "\(pds)", "reason": "\(error.description)",
                ])
                return
            }
        }
        let handle = resolved.handle?.description
        let renamed = handle?.lowercased() != record.handle?.lowercased()
        var verified = renamed ? resolved.handleVerified && handle != nil : record.handleVerified || resolved.handleVerified
        if !renamed, record.handleVerified, !resolved.handleVerified, let handle, let parsed = Handle(handle) {
            // Still the document's handle but not verified this time: a DNS outage keeps the
            // earlier verification; the handle now leading to another DID takes it away.
            if let owner = try? await identity.resolveHandle(parsed), owner != did { verified = false }
        }
        guard pdsMoved || renamed || verified != record.handleVerified else { return }
        do {
            try await session.adoptIdentity(handle: handle, handleVerified: verified, pds: pdsMoved ? pds : nil)
        } catch {
            logger.error("cannot save the account's new identity", metadata: ["error": "\(error)"])
            return
        }
    }

    /// `scheme://host[:port]`, so that a trailing slash or a path is not a move.
    private static func origin(_ url: String) -> String? {
        URL(string: url).flatMap(OAuthURLPolicy.origin(of:))
    }
}

extension AccountSession {
    /// Due every `interval`, and at once for a handle the PDS reported but nobody verified yet.
    func identityCheckDue(interval: TimeInterval) -> Bool {
        if record.handle != nil, !record.handleVerified, identityCheckInFlight == nil { return true }
        guard let identityCheckedAt else { return true }
        return environment.now().timeIntervalSince(identityCheckedAt) >= interval
    }

    func noteIdentityChecked() { identityCheckedAt = environment.now() }

    /// Runs `check` unless one is running (then waits for it) or one ran less than
    /// `minimumInterval` ago: concurrent refused calls share one look at the DID document.
    func sharedIdentityCheck(minimumInterval: TimeInterval, _ check: @escaping @Sendable () async -> Void) async {
        if let running = identityCheckInFlight { return await running.value }
        if minimumInterval > 0, let last = identityCheckedAt, environment.now().timeIntervalSince(last) < minimumInterval { return }
        // A recheck may save a new handle or PDS: not on a caller's event loop.
        let task = Task(executorPreference: globalConcurrentExecutor) { await check() }
        identityCheckInFlight = task
        await task.value
        identityCheckInFlight = nil
        releaseActivityIfIdle()
    }

    /// Saves what the DID document now says: the handle (naming the account only if verified)
    /// and, when it moved, the PDS.
    func adoptIdentity(handle: String?, handleVerified: Bool, pds: String?) async throws {
        var updated = record
        let oldHandle = updated.handle
        updated.handle = handle
        updated.handleVerified = handleVerified
        if let pds { updated.pds = pds }
        try await environment.storeCall { [updated] in try $0.saveIdentity(updated) }
        update(record: updated)
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
        guard record.pds == checked.pds, record.oauth?.issuer == checked.oauth?.issuer, record.state != .needsLogin else { return }
        var updated = record
        updated.state = .needsLogin
        updated.stateReason = reason
        updated.updatedAt = environment.now()
        do {
            // Over these tokens only: newer ones (a login elsewhere) are not marked.
            try await environment.storeCall { [updated] in
                try $0.markState(id: updated.id, state: .needsLogin, reason: reason, at: updated.updatedAt,
                                 endsRefresh: false, ifVersion: updated.secretsVersion)
            }
        } catch StoreError.tokensSuperseded {
            logger.info("newer tokens were stored meanwhile (a new login): the account is not marked")
            return
        } catch {
            logger.error("cannot save the account's state", metadata: ["error": "\(error)"])
            return
        }
        update(record: updated)
        cachedSecrets = nil
        logger.error("the account moved where its session cannot follow; it needs a new login", metadata: [
            "outcome": "needs-login", "reason": "\(detail)",
        ])
        await environment.reschedule(id, nil)
    }
}
