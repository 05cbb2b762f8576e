import Foundation
import GRDB

extension AccountStore {
    /// Every account, oldest first. Decrypts nothing.
    public func allAccounts() throws -> [AccountRecord] {
        try performRead("listing accounts") { db in
            try AccountRecord.order(AccountColumn.createdAt, AccountColumn.id).fetchAll(db)
        }
    }

    /// The account with this id, or nil.
    public func account(id: UUID) throws -> AccountRecord? {
        try performRead("looking up an account by id") { db in
            try AccountRecord.fetchOne(db, key: id)
        }
    }

    /// The account registered for this DID, or nil.
    public func account(did: String) throws -> AccountRecord? {
        try performRead("looking up an account by DID") { db in
            try AccountRecord.filter(AccountColumn.did == did).fetchOne(db)
        }
    }

    /// Accounts currently recorded with this handle (several can claim one
    /// handle until verification settles it), oldest first.
    public func accounts(handle: String) throws -> [AccountRecord] {
        try performRead("looking up accounts by handle") { db in
            try AccountRecord
                .filter(AccountColumn.handle == handle)
                .order(AccountColumn.createdAt, AccountColumn.id)
                .fetchAll(db)
        }
    }

    /// The default account, or nil when none is set.
    public func defaultAccount() throws -> AccountRecord? {
        try performRead("looking up the default account") { db in
            try AccountRecord.filter(AccountColumn.isDefault == true).fetchOne(db)
        }
    }

    /// How many accounts are registered.
    public func count() throws -> Int {
        try performRead("counting accounts") { db in
            try AccountRecord.fetchCount(db)
        }
    }

    /// Opens the sealed secrets of one account.
    /// - Throws: `StoreError.unknownAccount`, or `StoreError.secretDoesNotOpen`
    ///   when the key is wrong or the blob belongs to another account.
    public func secrets(for id: UUID) throws -> AccountSecrets {
        let blob = try performRead("reading account secrets") { db in
            try Data.fetchOne(
                db,
                sql: "SELECT sealed_secrets FROM account WHERE id = ?",
                arguments: [id])
        }
        guard let blob else { throw StoreError.unknownAccount(id) }
        return try sealer.open(blob, account: id)
    }
}

extension AccountStore {
    /// Checks that the store key opens what the store holds: one account's secrets and every
    /// client signing key. A replaced `store.key` is found at start rather than at the first
    /// refresh, which would otherwise fail for every account at once.
    /// - Throws: `StoreError.secretDoesNotOpen` or `.clientKeyDoesNotOpen`.
    public func verifyKey() throws {
        let sample = try performRead("checking the store key") { db in
            try Row.fetchOne(db, sql: "SELECT id, sealed_secrets FROM account ORDER BY created_at LIMIT 1")
        }
        if let sample {
            let id: UUID = sample["id"]
            let blob: Data = sample["sealed_secrets"]
            _ = try sealer.open(blob, account: id)
        }
        _ = try clientKeys()
    }
}

extension AccountStore {
    /// Calls `body` with every account, oldest first, one row at a time: a daemon loading
    /// 100,000 accounts never holds them all twice (as an array and as sessions).
    public func forEachAccount(_ body: (AccountRecord) throws -> Void) throws {
        try performRead("loading accounts") { db in
            let cursor = try AccountRecord.order(AccountColumn.createdAt, AccountColumn.id).fetchCursor(db)
            while let record = try cursor.next() { try body(record) }
        }
    }

    /// Frees the memory SQLite's connections hold (page caches), after a large read.
    public func releaseMemory() {
        pool.releaseMemory()
    }
}
