import AccountStoreCore
import BlueskyTesting
import Crypto
import Foundation
import PostgresStore
import SQLiteStore
import Synchronization
import Testing

/// The stores behind `AccountStore`, so that one test runs against all of them.
enum StoreBackend: String, CaseIterable, CustomTestStringConvertible, Sendable {
    case sqlite
    case postgresql
    case memory

    var testDescription: String { rawValue }

    /// A store of its own: a fresh SQLite directory, a fresh tenant in the shared test database
    /// (tenants see nothing of each other, which is what isolates the tests), or fresh tables.
    func open(key: SymmetricKey = SymmetricKey(size: .bits256), reuse place: OpenedStore? = nil) async throws -> OpenedStore {
        switch self {
        case .sqlite:
            let directory = try place?.directory ?? TemporaryDirectory()
            let store = try Fixtures.openStore(in: directory.url, key: key)
            return OpenedStore(store: store, directory: directory, tenant: nil, memory: nil)
        case .postgresql:
            let tenant = place?.tenant ?? SharedTestDatabase.freshTenant()
            let store = try await SharedTestDatabase.openStore(tenant: tenant, key: key)
            return OpenedStore(store: store, directory: nil, tenant: tenant, memory: nil)
        case .memory:
            let database = place?.memory ?? MemoryDatabase()
            return OpenedStore(store: MemoryAccountStore(database: database), directory: nil, tenant: nil, memory: database)
        }
    }

    /// Whether the backend seals secrets with the store key (the memory store keeps them as they are).
    var sealsSecrets: Bool { self != .memory }
}

extension StoreBackend {
    /// Runs `body` with a store of its own, closed and removed afterwards.
    func withStore<T>(_ body: (any AccountStore) async throws -> T) async throws -> T {
        let opened = try await open()
        do {
            let result = try await body(opened.store)
            await opened.close()
            return result
        } catch {
            await opened.close()
            throw error
        }
    }
}

/// One opened store and what to remove afterwards.
struct OpenedStore {
    let store: any AccountStore
    let directory: TemporaryDirectory?
    let tenant: String?
    let memory: MemoryDatabase?

    func close() async {
        await store.close()
        directory?.remove()
    }
}

/// One PostgreSQL server for the whole test process, started on first use: initdb takes a
/// second or two, a tenant per test costs nothing. It starts on a thread of its own, and every
/// test awaits it: a lazy `static let` would hold each test that asks meanwhile on a thread of
/// the concurrency pool (two here), and every other test with them.
enum SharedTestDatabase {
    static let database = "blueskyd_tests"

    private static let running = Mutex<PostgresServer?>(nil)
    private static let started = Task<(server: PostgresServer, url: String, password: String), any Error> {
        let (server, url, password) = try await offThePool {
            let server = try PostgresServer.start()
            running.withLock { $0 = server }
            atexit { SharedTestDatabase.stop() }
            let (url, password) = try SharedStoreHosts.createDatabase(database, on: server)
            return (server, url, password)
        }
        // The owner migrates; every tenant then connects as a role of its own name, as README
        // says (row-level security, forced, holds the owner to the tenant of its name too).
        let owner = try await PostgresAccountStore(
            settings: PostgresStoreSettings(url: url, password: password, tenant: database), key: SymmetricKey(size: .bits256),
            hostName: "owner", logger: Fixtures.logger)
        await owner.close()
        try await offThePool { try SharedStoreHosts.prepareTenantGroup(in: database, on: server) }
        return (server, url, password)
    }

    /// The tenants whose roles exist, with their passwords.
    private static let roles = Mutex<[String: String]>([:])

    static var server: PostgresServer {
        get async throws { try await started.value.server }
    }

    /// A host of `tenant`, connecting as the tenant's own role (made on first use).
    static func settings(tenant: String, leaseDuration: TimeInterval = 60) async throws -> PostgresStoreSettings {
        let server = try await started.value.server
        let password = try await role(tenant, on: server)
        return try PostgresStoreSettings(url: server.url(user: tenant, database: database) + "?sslmode=disable",
                                         password: password, tenant: tenant, leaseDuration: leaseDuration)
    }

    private static func role(_ tenant: String, on server: PostgresServer) async throws -> String {
        if let known = roles.withLock({ $0[tenant] }) { return known }
        let password = try await offThePool { try SharedStoreHosts.createTenantRole(tenant, in: database, on: server) }
        roles.withLock { $0[tenant] = password }
        return password
    }

    static func openStore(tenant: String, key: SymmetricKey, hostName: String = "test-host",
                          leaseDuration: TimeInterval = 60) async throws -> PostgresAccountStore {
        try await PostgresAccountStore(settings: await settings(tenant: tenant, leaseDuration: leaseDuration), key: key,
                                       hostName: hostName, logger: Fixtures.logger)
    }

    /// A tenant no other test uses.
    static func freshTenant() -> String { "t\(UUID().uuidString.prefix(12).lowercased())" }

    /// Two hosts of one fresh tenant, with one store key and leases of `leaseDuration`, closed afterwards.
    static func withTwoHosts(leaseDuration: TimeInterval = 60,
                             _ body: (_ a: PostgresAccountStore, _ b: PostgresAccountStore) async throws -> Void) async throws {
        let key = SymmetricKey(size: .bits256)
        let tenant = freshTenant()
        let a = try await openStore(tenant: tenant, key: key, hostName: "host-a", leaseDuration: leaseDuration)
        let b: PostgresAccountStore
        do {
            b = try await openStore(tenant: tenant, key: key, hostName: "host-b", leaseDuration: leaseDuration)
        } catch {
            await a.close()
            throw error
        }
        do {
            try await body(a, b)
        } catch {
            await a.close()
            await b.close()
            throw error
        }
        await a.close()
        await b.close()
    }

    /// At exit, which only a started server registered for.
    static func stop() {
        running.withLock { $0 }?.destroy()
    }
}

extension PostgresServer {
    /// `psql` on a thread of its own: a statement may wait for a lock (behind a DDL in another
    /// test) whose holder needs the cooperative pool to finish, and the pool has two threads.
    func run(_ sql: String, database: String = SharedTestDatabase.database) async throws -> String {
        try await offThePool { try self.psql(sql, database: database) }
    }
}
