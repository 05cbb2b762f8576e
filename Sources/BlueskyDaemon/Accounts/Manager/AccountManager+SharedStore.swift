import AccountStoreCore
import Foundation
import ServiceLifecycle
import WebBasics

extension AccountManager {
    /// Takes over a change another host made to the shared store: the account as it now is
    /// goes through the same path as this host's own changes (registry, census, events,
    /// schedule); an account removed there is forgotten here, one added there appears here.
    /// False when the store could not be read: the change is to be tried again.
    func applyStoreChange(_ change: StoreChange) async -> Bool {
        await applyStoreChanges([change]).isEmpty
    }

    /// Takes over many changes at once (what piled up while the last were read): their
    /// accounts are read `changeReadBatch` to a query, so that a burst of another host's
    /// refreshes costs this host a few reads, not one per account. Returns the changes whose
    /// accounts could not be read, to be tried again.
    func applyStoreChanges(_ changes: [StoreChange]) async -> [StoreChange] {
        var ids: [UUID] = []
        var failed: [StoreChange] = []
        for change in changes {
            switch change {
            case .account(let id): ids.append(id)
            case .everything: if !(await resynchronise()) { failed.append(change) }
            }
        }
        for start in stride(from: 0, to: ids.count, by: Self.changeReadBatch) {
            let batch = Array(ids[start..<min(start + Self.changeReadBatch, ids.count)])
            let stored: [AccountRecord]
            do {
                stored = try await store.accounts(ids: batch)
            } catch {
                logger.debug("cannot read accounts other hosts changed", metadata: ["accounts": "\(batch.count)", "error": "\(error)"])
                failed += batch.map { .account($0) }
                continue
            }
            let found = Dictionary(stored.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
            for id in batch {
                if found[id] != nil, !registry.contains(id) {
                    // New to this host, or removed here since the batch was read: read again,
                    // so that an account removed here stays removed (as `resynchronise` does).
                    do {
                        await apply(try await store.account(id: id), id: id)
                    } catch {
                        failed.append(.account(id))
                    }
                    continue
                }
                await apply(found[id], id: id)
            }
        }
        return failed
    }

    /// Accounts read per query when other hosts changed many.
    static let changeReadBatch = 500

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
            await track(stored)
            logger.info("account added on another host", metadata: ["account": "\(id.uuidString.lowercased())"])
        case (nil, nil):
            break
        }
    }

    /// Reads every account again after changes may have been missed (the listening connection
    /// was lost), a page at a time: takes over what changed, adds what is new, forgets what is
    /// gone. A host with a million accounts never holds them all twice.
    private func resynchronise() async -> Bool {
        // Only accounts known before the read may be forgotten for missing from it: one added
        // on this host meanwhile was not in it.
        var unseen = Set(registry.allSessions.map(\.id))
        let known = unseen
        var count = 0
        do {
            try await store.forEachAccount(pageSize: 5_000) { record in
                count += 1
                unseen.remove(record.id)
                if known.contains(record.id) || self.registry.contains(record.id) {
                    await self.apply(record, id: record.id)
                } else if let current = try? await self.store.account(id: record.id) {
                    // New to this host: read again, so that one removed here since the read stays removed.
                    await self.apply(current, id: record.id)
                }
            }
        } catch {
            logger.warning("cannot read the accounts again after a lost store connection", metadata: ["error": "\(error)"])
            return false
        }
        for id in unseen { await apply(nil, id: id) }
        logger.info("accounts read again from the shared store", metadata: ["count": "\(count)"])
        return true
    }
}

/// Hands the other hosts' changes, as the store hears them, to the accounts: what piled up
/// since the last wake-up, read together.
/// A change whose account cannot be read (the store failed while the listening connection
/// stayed up) is read again with backoff, while newer changes keep coming.
struct StoreChangeService: Service {
    let accounts: AccountManager
    let inbox: StoreChangeInbox
    var retryBackoff = Backoff.storeRetry

    func run() async throws {
        let retries = StoreChangeRetries()
        await cancelWhenGracefulShutdown {
            await withDiscardingTaskGroup { group in
                group.addTask { await retries.run(backoff: retryBackoff) { await accounts.applyStoreChange($0) } }
                for await _ in inbox.wakes {
                    for change in await accounts.applyStoreChanges(inbox.takeAll()) {
                        await retries.add(change)
                    }
                }
                group.cancelAll()
            }
        }
    }
}
