import BlueskyStore
import Foundation

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
            session = AccountSession(record: record, environment: environment)
            registry.insert(session, record: record)
            await session.publish(.accountAdded)
            logger.info("account added", metadata: [
                "account": "\(account)", "did": "\(record.did)", "auth": "\(record.authKind.rawValue)",
            ])
        }
        await scheduler.schedule(record.id, at: await session.nextRefreshDate(), host: record.refreshHost)
        refreshProfileSoon(of: session)
        return (record, session)
    }
}
