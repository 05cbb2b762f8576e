import BlueskyStore
import Foundation
import PostgresNIO

extension PostgresAccountStore {
    public func account(id: UUID) throws -> AccountRecord? {
        try records("looking up an account by id", where: "id = $2", Self.binds(settings.tenant, id)).first
    }

    public func account(did: String) throws -> AccountRecord? {
        try records("looking up an account by DID", where: "did = $2", Self.binds(settings.tenant, did)).first
    }

    /// Every account of the tenant, oldest first.
    public func allAccounts() throws -> [AccountRecord] {
        try records("listing accounts", where: "true", Self.binds(settings.tenant))
    }

    public func count() throws -> Int {
        try read("counting accounts") { session in
            try session.run("SELECT count(*) FROM account WHERE tenant = \(settings.tenant)").rows.first.map {
                Int(try $0.decode(Int64.self))
            } ?? 0
        }
    }

    /// Calls `body` with every account, oldest first, a page of 10,000 rows at a time: a host
    /// loading a million accounts never holds every row twice.
    public func forEachAccount(_ body: (AccountRecord) throws -> Void) throws {
        var after: (createdAt: Double, id: UUID)?
        while true {
            let page: [AccountRecord]
            if let after {
                page = try records("loading accounts", where: "(created_at, id) > ($2, $3)",
                                   Self.binds(settings.tenant, after.createdAt, after.id), limit: 10_000)
            } else {
                page = try records("loading accounts", where: "true", Self.binds(settings.tenant), limit: 10_000)
            }
            for record in page { try body(record) }
            guard page.count == 10_000, let last = page.last else { return }
            after = (last.createdAt.storedSeconds, last.id)
        }
    }

    /// Opens the sealed secrets of one of the tenant's accounts.
    public func secrets(for id: UUID) throws -> AccountSecrets {
        let blob = try read("reading account secrets") { session in
            try session.run("SELECT sealed_secrets FROM account WHERE tenant = \(settings.tenant) AND id = \(id)")
                .rows.first.map { try $0.decode(ByteBuffer.self) }
        }
        guard let blob else { throw StoreError.unknownAccount(id) }
        return try sealer.open(Data(buffer: blob), account: id)
    }

    /// Checks that the store key opens one account's secrets and every client key: a host
    /// given another key than its peers stops at start instead of failing every refresh.
    public func verifyKey() throws {
        let sample = try read("checking the store key") { session in
            try session.run("""
                SELECT id, sealed_secrets FROM account WHERE tenant = \(settings.tenant) ORDER BY created_at LIMIT 1
                """).rows.first.map { try $0.decode((UUID, ByteBuffer).self) }
        }
        if let (id, blob) = sample { _ = try sealer.open(Data(buffer: blob), account: id) }
        _ = try clientKeys()
    }

    /// The lease on an account's refresh as stored, for diagnostics and tests.
    public func refreshLease(id: UUID) throws -> (owner: String, until: Date)? {
        try read("reading a refresh lease") { session in
            guard let row = try session.run("""
                SELECT lease_owner, lease_expires_at FROM account WHERE tenant = \(settings.tenant) AND id = \(id)
                """).rows.first else { return nil }
            let (owner, until) = try row.decode((String?, Double?).self)
            guard let owner, let until else { return nil }
            return (owner, Date(storedSeconds: until))
        }
    }

    private func records(_ context: String, where condition: String, _ binds: PostgresBindings,
                         limit: Int? = nil) throws -> [AccountRecord] {
        let sql = "SELECT \(Self.recordColumns) FROM account WHERE tenant = $1 AND \(condition) ORDER BY created_at, id"
            + (limit.map { " LIMIT \($0)" } ?? "")
        return try read(context) { session in
            try session.run(PostgresQuery(unsafeSQL: sql, binds: binds)).rows.map(Self.record)
        }
    }
}
