import ATIdentity
import ATOAuth
import ATSyntax
import AccountStoreCore
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
        background.start(.identityCheck) {
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
