import BlueskyStore
import Foundation
import ServiceLifecycle

extension AccountManager {
    /// Takes over a change another host made to the shared store: the account as it now is
    /// goes through the same path as this host's own changes (registry, census, events,
    /// schedule); an account removed there is forgotten here, one added there appears here.
    func applyStoreChange(_ change: StoreChange) async {
        switch change {
        case .account(let id):
            let stored: AccountRecord?
            do {
                stored = try store.account(id: id)
            } catch {
                // The store is down: the reconnection's `.everything` reads it all again.
                logger.debug("cannot read an account another host changed", metadata: ["error": "\(error)"])
                return
            }
            await apply(stored, id: id)
        case .everything:
            await resynchronise()
        }
    }

    private func apply(_ stored: AccountRecord?, id: UUID) async {
        let session = try? registry.session(id.uuidString)
        switch (session, stored) {
        case (let session?, let stored?):
            await session.adoptStored(stored)
        case (let session?, nil):
            guard await forget(await session.record, fields: ["elsewhere": .bool(true)]) else { return }
            logger.info("account removed on another host", metadata: ["account": "\(id.uuidString.lowercased())"])
        case (nil, let stored?):
            if let other = registry.id(forDID: stored.did), let stale = try? registry.session(other.uuidString) {
                // Removed and added again elsewhere under a new id: the old one is gone.
                await apply(nil, id: stale.id)
            }
            await track(stored, addedElsewhere: true)
            logger.info("account added on another host", metadata: ["account": "\(id.uuidString.lowercased())"])
        case (nil, nil):
            break
        }
    }

    /// Reads every account again after changes may have been missed (the listening connection
    /// was lost): takes over what changed, adds what is new, forgets what is gone.
    private func resynchronise() async {
        let stored: [AccountRecord]
        do {
            stored = try store.allAccounts()
        } catch {
            logger.warning("cannot read the accounts again after a lost store connection", metadata: ["error": "\(error)"])
            return
        }
        let present = Set(stored.map(\.id))
        for record in stored { await apply(record, id: record.id) }
        for session in registry.allSessions where !present.contains(session.id) { await apply(nil, id: session.id) }
        logger.info("accounts read again from the shared store", metadata: ["count": "\(stored.count)"])
    }
}

/// Hands the other hosts' changes, as the store hears them, to the accounts one at a time.
struct StoreChangeService: Service {
    let accounts: AccountManager
    let changes: AsyncStream<StoreChange>

    func run() async throws {
        await cancelWhenGracefulShutdown {
            for await change in changes { await accounts.applyStoreChange(change) }
        }
    }
}
