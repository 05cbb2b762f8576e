import BlueskyStore
import Foundation
import JSONRPC

extension AccountManager {
    /// Saves a session that just signed in, whichever way: a new account, or, for a DID
    /// already registered, the known account signed in again in place (an upgrade to OAuth, a
    /// needs-login account mended). In place keeps the id, the creation date and the default
    /// flag, so scripts naming the account by UUID never notice. Schedules its next refresh.
    func register(_ proposed: AccountRecord, secrets: AccountSecrets)
        async throws(DaemonError) -> (record: AccountRecord, session: AccountSession)
    {
        var record = proposed
        let account = "\(record.id.uuidString.lowercased())"
        let session: AccountSession
        if let existingID = registry.id(forDID: record.did), let existing = try? registry.session(existingID.uuidString) {
            let old = await existing.record
            record.id = old.id
            record.createdAt = old.createdAt
            record.isDefault = old.isDefault
            // The same person: their profile stays shown until the fetch below replaces it.
            record.profile = old.profile
            do {
                record.secretsVersion = try store.replaceSession(record, secrets: secrets)
            } catch {
                throw .internalError("cannot save the account: \(error)")
            }
            await existing.adoptNewSession(record)
            await scheduler.schedule(record.id, at: await existing.nextRefreshDate(), host: record.refreshHost)
            session = existing
            logger.info("account signed in again", metadata: [
                "account": "\(record.id.uuidString.lowercased())", "did": "\(record.did)",
                "was": "\(old.authKind.rawValue)", "auth": "\(record.authKind.rawValue)",
            ])
        } else {
            do {
                try store.insert(record, secrets: secrets)
            } catch StoreError.duplicateDID(let existing) {
                throw .accountExists(existing)
            } catch {
                throw .internalError("cannot save the account: \(error)")
            }
            session = await track(record)
            logger.info("account added", metadata: [
                "account": "\(account)", "did": "\(record.did)", "auth": "\(record.authKind.rawValue)",
            ])
        }
        refreshProfileSoon(of: session)
        return (record, session)
    }

    /// Starts keeping an account the store holds: its session in the registry, `account.added`,
    /// its place in the schedule. One `addedElsewhere` (by another host) is in the shared
    /// schedule already.
    @discardableResult
    func track(_ record: AccountRecord, addedElsewhere: Bool = false) async -> AccountSession {
        let session = AccountSession(record: record, environment: environment)
        registry.insert(session, record: record)
        await session.publish(.accountAdded)
        if addedElsewhere {
            await scheduler.know(record.id, host: record.refreshHost)
        } else {
            await scheduler.schedule(record.id, at: await session.nextRefreshDate(), host: record.refreshHost)
        }
        return session
    }

    /// Stops keeping an account the store no longer holds, publishing `account.removed` with
    /// `fields`. False when it was no longer kept.
    @discardableResult
    func forget(_ record: AccountRecord, fields: [String: JSONValue]) async -> Bool {
        guard registry.remove(record) != nil else { return false }
        await scheduler.remove(record.id)
        environment.events.publish(.accountRemoved, account: record.eventKeys,
                                   view: AccountView.json(record, nextRefreshAt: nil), fields: fields)
        return true
    }
}
