import Foundation

/// The store's contract, on the in-memory tables.
extension MemoryAccountStore {
    public func insert(contentsOf accounts: [(record: AccountRecord, secrets: AccountSecrets)]) async throws(StoreError) {
        try await write(.insert) { tables throws(StoreError) in
            var staged = tables
            for (record, secrets) in accounts {
                if let existing = staged.id(ofDID: record.did) { throw .duplicateDID(existing: existing) }
                guard staged.rows[record.id] == nil else { throw .duplicateAccountID(record.id) }
                if record.isDefault { Self.clearDefault(&staged, except: record.id, at: record.updatedAt) }
                staged.rows[record.id] = MemoryDatabase.Row(record: record, secrets: secrets)
            }
            tables = staged
            return ((), accounts.map(\.record.id))
        }
    }

    public func saveIdentity(_ record: AccountRecord) async throws(StoreError) {
        try await write(.saveIdentity) { tables throws(StoreError) in
            guard var row = tables.rows[record.id] else { throw .unknownAccount(record.id) }
            row.record.merge(identityOf: record)
            tables.rows[record.id] = row
            return ((), [record.id])
        }
    }

    public func replaceSession(_ record: AccountRecord, secrets: AccountSecrets) async throws(StoreError) -> Int64 {
        try await write(.replaceSession) { tables throws(StoreError) in
            guard let old = tables.rows[record.id] else { throw .unknownAccount(record.id) }
            if let other = tables.id(ofDID: record.did), other != record.id { throw .duplicateDID(existing: other) }
            var session = record
            session.createdAt = old.record.createdAt
            session.isDefault = old.record.isDefault
            session.profile = old.record.profile
            session.refreshStartedAt = nil
            session.secretsVersion = old.record.secretsVersion + 1
            tables.rows[record.id] = MemoryDatabase.Row(record: session, secrets: secrets)
            tables.nonces[record.id] = nil
            return (session.secretsVersion, [record.id])
        }
    }

    public func setProfile(id: UUID, _ profile: AccountProfile?, at: Date) async throws(StoreError) {
        try await update(.setProfile, id) { $0.record.profile = profile }
    }

    public func setDefault(id: UUID, at: Date) async throws(StoreError) {
        try await write(.setDefault) { tables throws(StoreError) in
            guard tables.rows[id] != nil else { throw .unknownAccount(id) }
            let cleared = Self.clearDefault(&tables, except: id, at: at)
            let wasDefault = tables.rows[id]!.record.isDefault
            tables.rows[id]!.record.isDefault = true
            if !wasDefault { tables.rows[id]!.record.updatedAt = at }
            return ((), cleared + [id])
        }
    }

    public func clearDefault(at: Date) async throws(StoreError) {
        try await write(.clearDefault) { tables in ((), Self.clearDefault(&tables, except: nil, at: at)) }
    }

    @discardableResult
    public func delete(id: UUID) async throws(StoreError) -> AccountRecord {
        try await write(.delete) { tables throws(StoreError) in
            guard let row = tables.rows.removeValue(forKey: id) else { throw .unknownAccount(id) }
            tables.nonces[id] = nil
            return (row.record, [id])
        }
    }

    public func claimRefresh(id: UUID, expecting version: Int64, at now: Date) async throws(StoreError) -> RefreshClaim {
        let (me, until) = (leaseOwner, now.addingTimeInterval(leaseDuration))
        return try await write(.claimRefresh) { tables throws(StoreError) in
            guard var row = tables.rows[id] else { throw .unknownAccount(id) }
            if let verdict = RefreshClaim.decide(storedVersion: row.record.secretsVersion, expected: version,
                                                 owner: row.leaseOwner, leaseEnds: row.leaseEnds, me: me, now: now) {
                return (verdict, [])
            }
            let interrupted = row.record.refreshStartedAt
            row.record.refreshStartedAt = now
            row.record.updatedAt = now
            (row.leaseOwner, row.leaseEnds) = (me, until)
            tables.rows[id] = row
            return (.granted(interruptedAt: interrupted), [])
        }
    }

    public func saveRefreshedSession(id: UUID, secrets: AccountSecrets, accessExpiresAt: Date?, refreshExpiresAt: Date?,
                                     scope: String?, handle: String?, at: Date,
                                     replacing version: Int64) async throws(StoreError) -> Int64 {
        try await write(.saveRefreshedSession) { tables throws(StoreError) in
            guard var row = tables.rows[id] else { throw .unknownAccount(id) }
            guard row.record.secretsVersion == version else { throw .tokensSuperseded(id) }
            row.secrets = secrets
            row.record.secretsVersion = version + 1
            row.record.accessExpiresAt = accessExpiresAt
            row.record.refreshExpiresAt = refreshExpiresAt
            row.record.lastRefreshAt = at
            row.record.refreshStartedAt = nil
            if let scope { row.record.oauth?.scope = scope }
            if let handle {
                row.record.handle = handle
                row.record.handleVerified = false
            }
            (row.leaseOwner, row.leaseEnds) = (nil, nil)
            row.record.state = .active
            row.record.stateReason = nil
            row.record.updatedAt = at
            tables.rows[id] = row
            return (version + 1, [id])
        }
    }

    public func markState(id: UUID, state: AccountState, reason: String?, at: Date, lease: LeaseRelease,
                          ifVersion version: Int64?) async throws(StoreError) {
        let me = leaseOwner
        try await write(.markState) { tables throws(StoreError) in
            guard var row = tables.rows[id] else { throw .unknownAccount(id) }
            if let version, row.record.secretsVersion != version { throw .tokensSuperseded(id) }
            row.record.state = state
            row.record.stateReason = reason
            row.record.updatedAt = at
            // Another host's lease (it took the account over meanwhile) stays.
            if lease != .keep, row.leaseOwner == nil || row.leaseOwner == me {
                (row.leaseOwner, row.leaseEnds) = (nil, nil)
                if lease == .release { row.record.refreshStartedAt = nil }
            }
            tables.rows[id] = row
            return ((), [id])
        }
    }

    public func account(id: UUID) async throws(StoreError) -> AccountRecord? {
        try read { $0.rows[id]?.record }
    }

    public func account(did: String) async throws(StoreError) -> AccountRecord? {
        try read { tables in tables.id(ofDID: did).flatMap { tables.rows[$0]?.record } }
    }

    public func accounts(after key: AccountPageKey?, limit: Int) async throws(StoreError) -> [AccountRecord] {
        try read { tables in
            let ordered = tables.rows.values.map(\.record).sorted { AccountPageKey($0).precedes($1) }
            return Array(ordered.filter { key?.precedes($0) ?? true }.prefix(limit))
        }
    }

    /// Newest first: unlike `accounts(after:limit:)`'s order on purpose, so that tests of a
    /// start show that nothing in it hangs on the rows coming oldest first.
    public func forEachAccountAsStored(pageSize: Int, _ body: (AccountRecord) async throws -> Void) async throws {
        let records = try read { tables in tables.rows.values.map(\.record).sorted { AccountPageKey($1).precedes($0) } }
        for record in records { try await body(record) }
    }

    public func count() async throws(StoreError) -> Int { try read { $0.rows.count } }

    public func secrets(for id: UUID) async throws(StoreError) -> AccountSecrets {
        try read { tables throws(StoreError) in
            guard let row = tables.rows[id] else { throw .unknownAccount(id) }
            return row.secrets
        }
    }

    public func verifyKey() async throws(StoreError) {}

    public func portableAccounts(after key: AccountPageKey?, limit: Int) async throws(StoreError) -> [PortableAccount] {
        try await portableAccountsOneByOne(after: key, limit: limit)
    }

    /// Nothing is written where anyone else could change it: every row is as written.
    public func unsealedAccounts() async throws(StoreError) -> [UnsealedAccount] { [] }

    public func sealAccounts(_ ids: [UUID], at: Date) async throws(StoreError) -> [UUID] { [] }

    public func saveDPoPNonces(_ nonces: [StoredDPoPNonce]) async throws(StoreError) {
        guard !nonces.isEmpty else { return }
        try await write(.saveDPoPNonces) { tables in
            for entry in StoredDPoPNonce.newestPerOrigin(nonces) where tables.rows[entry.account] != nil {
                tables.nonces[entry.account, default: [:]][entry.origin] = entry
            }
            return ((), [])
        }
    }

    public func allDPoPNonces() async throws(StoreError) -> [StoredDPoPNonce] {
        try read { tables in
            tables.nonces.values.flatMap(\.values).sorted {
                ($0.account.uuidString, $0.origin) < ($1.account.uuidString, $1.origin)
            }
        }
    }

    public func addClientKey(_ key: StoredClientKey) async throws(StoreError) {
        try await write(.addClientKey) { tables throws(StoreError) in
            guard tables.clientKeys[key.keyID] == nil else {
                throw .database(context: "saving an OAuth client key", reason: "the key id \(key.keyID) is taken")
            }
            tables.clientKeys[key.keyID] = key
            return ((), [])
        }
    }

    public func clientKeys() async throws(StoreError) -> [StoredClientKey] {
        try read { $0.clientKeys.values.sorted { ($0.createdAt, $0.keyID) < ($1.createdAt, $1.keyID) } }
    }

    public func removeClientKey(_ keyID: String) async throws(StoreError) -> Bool {
        try await write(.removeClientKey) { tables in
            guard !tables.rows.values.contains(where: { $0.record.oauth?.clientKeyID == keyID }) else { return (false, []) }
            return (tables.clientKeys.removeValue(forKey: keyID) != nil, [])
        }
    }

    public func clientKeyIDsInUse() async throws(StoreError) -> Set<String> {
        try read { Set($0.rows.values.compactMap(\.record.oauth?.clientKeyID)) }
    }

    // MARK: - Helpers

    /// Changes one row with `change`; the account must exist.
    private func update(_ kind: MemoryWrite, _ id: UUID, _ change: (inout MemoryDatabase.Row) -> Void) async throws(StoreError) {
        try await write(kind) { tables throws(StoreError) in
            guard tables.rows[id] != nil else { throw .unknownAccount(id) }
            change(&tables.rows[id]!)
            return ((), [id])
        }
    }

    /// Leaves no default but `id`; returns the accounts that changed.
    @discardableResult
    private static func clearDefault(_ tables: inout MemoryDatabase.Tables, except id: UUID?, at: Date) -> [UUID] {
        let cleared = tables.rows.values.filter { $0.record.isDefault && $0.record.id != id }.map(\.record.id)
        for other in cleared {
            tables.rows[other]!.record.isDefault = false
            tables.rows[other]!.record.updatedAt = at
        }
        return cleared
    }
}
