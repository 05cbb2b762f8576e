import AccountStoreCore
import Foundation
import Synchronization

/// Finds account sessions by UUID, DID or handle, and knows the default account.
///
/// Lookups happen on every proxied call, so the index sits behind a mutex rather than an actor
/// hop. The store stays the source of truth; this is its in-memory index.
final class AccountRegistry: Sendable {
    /// Dense tables, not dictionaries: at 1,000,000 accounts each dictionary was 50 MB, each
    /// of these is 32 (`DenseTable`). They map to sessions themselves (8 bytes) rather than
    /// their ids (16).
    private struct Index {
        var byID = DenseTable<UUID, AccountSession>()
        var byDID = DenseTable<String, AccountSession>()
        var byHandle = DenseTable<String, AccountSession>()
        var defaultID: UUID?
    }

    private let index = Mutex(Index())
    /// Accounts per state, kept as records change.
    let census = AccountCensus()

    var count: Int { index.withLock { $0.byID.count } }

    var defaultID: UUID? { index.withLock { $0.defaultID } }

    /// Whether a login should make its account the default: none is, and no account's row
    /// fails its seal (the default may be among those: someone who cleared it and flagged
    /// another row would otherwise have the next login make that one the default).
    var needsDefault: Bool { defaultID == nil && census.altered(limit: 0).count == 0 }

    var allSessions: [AccountSession] { index.withLock { $0.byID.values } }

    func contains(_ id: UUID) -> Bool { index.withLock { $0.byID[id] != nil } }

    /// Whether `session` is the one kept for its account (not one forgotten, nor replaced).
    func holds(_ session: AccountSession) -> Bool { index.withLock { $0.byID[session.id] === session } }

    /// Makes room for `count` more accounts at once (start-up), instead of growing step by step.
    func reserveCapacity(_ count: Int) {
        index.withLock { index in
            index.byID.reserveCapacity(index.byID.count + count)
            index.byDID.reserveCapacity(index.byDID.count + count)
            index.byHandle.reserveCapacity(index.byHandle.count + count)
        }
    }

    /// Registers `session`. Returns the session that named its handle until now, if another
    /// did: two rows can both hold one verified handle for a while (an old verification is kept
    /// through a DNS outage), and a start gives it to the newer account (`keepNewerHandle`).
    @discardableResult
    func insert(_ session: AccountSession, record: AccountRecord) -> (displaced: AccountSession, handle: String)? {
        census.add(record)
        return index.withLock { index in
            index.byID[record.id] = session
            index.byDID[record.did] = session
            if record.isDefault, record.selectorsAreSealed { index.defaultID = record.id }
            // Only a verified handle names an account: anyone's DID document can claim any handle.
            guard let handle = Self.name(record), let displaced = index.byHandle.updateValue(session, forKey: handle),
                  displaced !== session else { return nil }
            return (displaced, handle)
        }
    }

    /// Of `displaced` and the session that names `handle` now, the one whose account was created
    /// later (then the greater id) names it, as when a start loaded the rows oldest first; a
    /// session that no longer claims the handle is left as it is.
    func keepNewerHandle(_ handle: String, displaced: AccountSession) async {
        guard let holder = index.withLock({ $0.byHandle[handle] }), holder !== displaced else { return }
        let (old, current) = (await displaced.record, await holder.record)
        guard Self.name(old) == handle, (old.createdAt, old.id.uuidString) > (current.createdAt, current.id.uuidString) else { return }
        index.withLock { index in
            if index.byHandle[handle] === holder, index.byID[old.id] === displaced { index.byHandle[handle] = displaced }
        }
    }

    @discardableResult
    func remove(_ record: AccountRecord) -> AccountSession? {
        index.withLock { index in
            guard let session = index.byID.removeValue(forKey: record.id) else { return nil }
            census.remove(record)
            if index.byDID[record.did] === session { index.byDID[record.did] = nil }
            if let handle = record.handle.map(Self.folded), index.byHandle[handle] === session { index.byHandle[handle] = nil }
            if index.defaultID == record.id { index.defaultID = nil }
            return session
        }
    }

    /// Follows a change of a registered account's record: the census, the handle index (only a
    /// verified handle names an account) and the default. A session removed meanwhile (a
    /// refresh finishing after a logout) is left out: false.
    @discardableResult
    func recordChanged(_ session: AccountSession, from old: AccountRecord, to new: AccountRecord) -> Bool {
        index.withLock { index in
            guard index.byID[new.id] === session else { return false }
            census.change(from: old, to: new)
            let oldName = Self.name(old), newName = Self.name(new)
            if oldName != newName {
                if let oldName, index.byHandle[oldName] === session { index.byHandle[oldName] = nil }
                if let newName { index.byHandle[newName] = session }
            }
            let wasDefault = old.isDefault && old.selectorsAreSealed, isDefault = new.isDefault && new.selectorsAreSealed
            if isDefault, !wasDefault {
                index.defaultID = new.id
            } else if wasDefault, !isDefault, index.defaultID == new.id {
                index.defaultID = nil
            }
            return true
        }
    }

    /// The session named by `reference` (UUID, DID, an OAuth 2.0 account's `issuer#subject`, or
    /// handle), or the default one when nil.
    func session(_ reference: String?) throws(DaemonError) -> AccountSession {
        let found: AccountSession? = index.withLock { index in
            guard let reference else { return index.defaultID.flatMap { index.byID[$0] } }
            // Most calls name a DID or a handle: skip Foundation's UUID parser for those.
            if reference.utf8.count == 36, let id = UUID(uuidString: reference) { return index.byID[id] }
            if reference.hasPrefix("did:") { return index.byDID[reference] }
            // An OAuth 2.0 server's account by its key (`<issuer>#<subject>`).
            if reference.hasPrefix("https://") || reference.hasPrefix("http://") { return index.byDID[reference] }
            let handle = reference.hasPrefix("@") ? String(reference.dropFirst()) : reference
            return index.byHandle[Self.folded(handle)]
        }
        guard let found else {
            throw reference.map { DaemonError.accountNotFound($0) } ?? .noDefaultAccount
        }
        return found
    }

    /// The name a record answers to: its handle, folded, when verified and sealed with the row.
    /// Anyone's DID document can claim any handle, and anyone who can write the database any
    /// column: a row whose seal does not hold is named by its id and DID alone.
    private static func name(_ record: AccountRecord) -> String? {
        guard record.handleVerified, record.selectorsAreSealed, let handle = record.handle else { return nil }
        return folded(handle)
    }

    /// The handle in lower case; the same string (sharing its storage with the record) when it
    /// already is, as nearly every handle is: at 100,000 accounts a copy each is 6 MB.
    static func folded(_ handle: String) -> String {
        handle.utf8.contains { $0 >= 0x41 && $0 <= 0x5A } || !handle.utf8.allSatisfy({ $0 < 0x80 }) ? handle.lowercased() : handle
    }

    func id(forDID did: String) -> UUID? {
        index.withLock { $0.byDID[did]?.id }
    }
}
