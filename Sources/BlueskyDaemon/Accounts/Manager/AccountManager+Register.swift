import AccountStoreCore
import Foundation
import JSONRPC

extension AccountManager {
    /// Saves a session that just signed in, whichever way: a new account, or, for a DID
    /// already registered, the known account signed in again in place (an upgrade to OAuth, a
    /// needs-login account mended). In place keeps the id, the creation date and the default
    /// flag, so scripts naming the account by UUID never notice. Schedules its next refresh.
    /// - Parameter settle: for an account signed in again, the record and secrets to store,
    ///   given the proposed ones and the session replaced as it is when the login takes its
    ///   turn (`AccountSession.signInAgain`).
    func register(
        _ proposed: AccountRecord, secrets: AccountSecrets,
        settle: @escaping @Sendable (AccountRecord, AccountSecrets, AccountRecord, AccountSecrets?) -> (AccountRecord, AccountSecrets)
            = { record, secrets, _, _ in (record, secrets) }
    ) async throws(DaemonError) -> (record: AccountRecord, session: AccountSession, replaced: AccountSession.SignedInAgain?) {
        var record = proposed
        let account = "\(record.id.uuidString.lowercased())"
        let session: AccountSession
        var replaced: AccountSession.SignedInAgain?
        if let existingID = registry.id(forDID: record.did), let existing = try? registry.session(existingID.uuidString) {
            let again = try await existing.signInAgain(record, secrets: secrets, settle: settle)
            record = again.record
            replaced = again
            session = existing
            logger.info("account signed in again", metadata: [
                "account": "\(record.id.uuidString.lowercased())", "did": "\(record.did)",
                "was": "\(again.replacedRecord.authKind.rawValue)", "auth": "\(record.authKind.rawValue)",
            ])
        } else {
            do {
                try await store.insert(record, secrets: secrets)
            } catch .duplicateDID(let existing) {
                throw .accountExists(existing)
            } catch {
                throw .internalError("cannot save the account: \(error)")
            }
            session = await track(record)
            // Its first date is this host's decision (a shared schedule records it).
            await session.retime()
            logger.info("account added", metadata: [
                "account": "\(account)", "did": "\(record.did)", "auth": "\(record.authKind.rawValue)",
            ])
        }
        refreshProfileSoon(of: session)
        return (record, session, replaced)
    }

    /// Starts keeping an account the store holds: its session in the registry (which tells the
    /// scheduler its date), `account.added`.
    @discardableResult
    func track(_ record: AccountRecord) async -> AccountSession {
        let session = AccountSession(record: record, environment: environment)
        registry.insert(session, record: record)
        await session.publish(.accountAdded)
        return session
    }

    /// Stops keeping an account the store no longer holds, publishing `account.removed` with
    /// `fields`. False when it was no longer kept.
    @discardableResult
    func forget(_ record: AccountRecord, fields: [String: JSONValue]) async -> Bool {
        guard let session = registry.remove(record) else { return false }
        // What its calls read goes with it (a call under way publishes nothing more: `holds`).
        environment.liveTargets.withdraw(record.id, owner: session)
        await scheduler.remove(record.id)
        environment.events.publish(.accountRemoved, account: record.eventKeys,
                                   view: AccountView.json(record, nextRefreshAt: nil), fields: fields)
        return true
    }
}
