import AccountStoreCore
import Foundation
import GRDB

extension SQLiteAccountStore {
    public func account(id: UUID) async throws(StoreError) -> AccountRecord? {
        try await performRead("looking up an account by id") { db in
            try Row.fetchOne(db, AccountRecord.filter(key: id)).map(self.verified)
        }
    }

    public func account(did: String) async throws(StoreError) -> AccountRecord? {
        try await performRead("looking up an account by DID") { db in
            try Row.fetchOne(db, AccountRecord.filter(AccountColumn.did == did)).map(self.verified)
        }
    }

    public func accounts(after key: AccountPageKey?, limit: Int) async throws(StoreError) -> [AccountRecord] {
        try await performRead("listing accounts") { db in
            var request = AccountRecord.order(AccountColumn.createdAt, AccountColumn.id).limit(limit)
            if let key {
                request = request.filter(sql: "(created_at, id) > (?, ?)", arguments: [key.createdAt.storedSeconds, key.id])
            }
            // Through a cursor: a page of GRDB rows would be 10,000 short-lived allocations
            // interleaved with the sessions a start-up makes from them.
            var page: [AccountRecord] = []
            page.reserveCapacity(limit)
            let rows = try Row.fetchCursor(db, request)
            var layout: AccountRowLayout?
            while let row = try rows.next() {
                page.append(try self.verified(row, layout: .of(row, cached: &layout)))
            }
            return page
        }
    }

    /// Every account in the order of the table's rows, a page at a time, one page ahead. Read
    /// oldest first, through the `(created_at, id)` index, the rows of accounts that share a
    /// creation time (a store written at once) come in UUID order, scattered over the file:
    /// at 100,000 accounts, 58,000 page reads of 29,000 pages. In row order each page is read once.
    /// Row ids hold still while blueskyd has the store open (only a `VACUUM` renumbers them, and
    /// blueskyd runs none); each page is its own read.
    public func forEachAccountAsStored(pageSize: Int, _ body: (AccountRecord) async throws -> Void) async throws {
        try await AccountPages.forEach(from: nil as Int64?, { [self] after in
            try await storedAccounts(afterRow: after, limit: pageSize)
        }, body)
    }

    /// Up to `limit` accounts after the table row `row` (nil: from the first), in row order,
    /// with the row after which the next page starts (nil after the last page).
    func storedAccounts(afterRow row: Int64?, limit: Int) async throws(StoreError) -> (page: [AccountRecord], next: Int64?) {
        try await performRead("loading accounts") { db in
            var request = AccountRecord.select([Column.rowID] + AccountRecord.databaseSelection).order(Column.rowID).limit(limit)
            if let row { request = request.filter(Column.rowID > row) }
            var page: [AccountRecord] = []
            page.reserveCapacity(limit)
            var last: Int64?
            let rows = try Row.fetchCursor(db, request)
            var layout: AccountRowLayout?
            while let row = try rows.next() {
                last = row[0]
                page.append(try self.verified(row, layout: .of(row, cached: &layout)))
            }
            return (page, page.count == limit ? last : nil)
        }
    }

    public func portableAccounts(after key: AccountPageKey?, limit: Int) async throws(StoreError) -> [PortableAccount] {
        let rows = try await performRead("reading accounts to copy") { db -> [(AccountRecord, Data)] in
            var request = AccountRecord.order(AccountColumn.createdAt, AccountColumn.id).limit(limit)
                .select(AccountRecord.databaseSelection + [AccountColumn.sealedSecrets])
            if let key {
                request = request.filter(sql: "(created_at, id) > (?, ?)", arguments: [key.createdAt.storedSeconds, key.id])
            }
            let rows = try Row.fetchAll(db, request)
            let layout = rows.first.map(AccountRowLayout.init)
            return try rows.map { (try self.verified($0, layout: layout), $0[AccountColumn.sealedSecrets]) }
        }
        return try rows.map { (record, blob) throws(StoreError) in
            guard !record.isAltered else { throw StoreError.recordAltered(account: record.id) }
            return PortableAccount(record: record, secrets: try sealer.open(blob, account: record.id))
        }
    }

    public func count() async throws(StoreError) -> Int {
        try await performRead("counting accounts") { db in
            try AccountRecord.fetchCount(db)
        }
    }

    /// Opens the sealed secrets of one account, once its metadata seal holds: tokens of a row
    /// rewritten outside blueskyd are never handed out.
    public func secrets(for id: UUID) async throws(StoreError) -> AccountSecrets {
        let found = try await performRead("reading account secrets") { db -> (AccountRecord, Data)? in
            let request = AccountRecord.filter(key: id).select(AccountRecord.databaseSelection + [AccountColumn.sealedSecrets])
            guard let row = try Row.fetchOne(db, request) else { return nil }
            return (try self.verified(row), row[AccountColumn.sealedSecrets])
        }
        guard let (record, blob) = found else { throw StoreError.unknownAccount(id) }
        guard !record.isAltered else { throw StoreError.recordAltered(account: id) }
        return try sealer.open(blob, account: id)
    }

    public func verifyKey() async throws(StoreError) {
        let samples = try await performRead("checking the store key") { db in
            let request = AccountRecord.order(AccountColumn.createdAt, AccountColumn.id).limit(StoreKeyCheck.sampleSize)
                .select(AccountRecord.databaseSelection + [AccountColumn.sealedSecrets])
            return try Row.fetchAll(db, request).map { row in
                StoreKeyCheck.Sample(id: row[AccountColumn.id], row: try Self.parsed(row), seal: row[AccountColumn.metadataSeal],
                                     blob: row[AccountColumn.sealedSecrets])
            }
        }
        try StoreKeyCheck(sealer: sealer, tenant: Self.tenant).verify(samples)
        _ = try await clientKeys()
    }
}
