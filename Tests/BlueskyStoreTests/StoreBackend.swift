import BlueskyStore
import BlueskyTesting
import Crypto
import Foundation
import PostgresStore
import Synchronization
import Testing

/// The two stores behind `AccountStorage`, so that one test runs against both.
enum StoreBackend: String, CaseIterable, CustomTestStringConvertible, Sendable {
    case sqlite
    case postgresql

    var testDescription: String { rawValue }

    /// A store of its own: a fresh SQLite directory, or a fresh tenant in the shared test
    /// database (tenants see nothing of each other, which is what isolates the tests).
    func open(key: SymmetricKey = SymmetricKey(size: .bits256), reuse place: OpenedStore? = nil) throws -> OpenedStore {
        switch self {
        case .sqlite:
            let directory = try place?.directory ?? TemporaryDirectory()
            let store = try Fixtures.openStore(in: directory.url, key: key)
            return OpenedStore(store: store, directory: directory, tenant: nil)
        case .postgresql:
            let tenant = place?.tenant ?? SharedTestDatabase.freshTenant()
            let store = try SharedTestDatabase.openStore(tenant: tenant, key: key)
            return OpenedStore(store: store, directory: nil, tenant: tenant)
        }
    }
}

extension StoreBackend {
    /// Runs `body` with a store of its own, closed and removed afterwards.
    func withStore<T>(_ body: (any AccountStorage) throws -> T) throws -> T {
        let opened = try open()
        defer { opened.close() }
        return try body(opened.store)
    }
}

/// One opened store and what to remove afterwards.
struct OpenedStore {
    let store: any AccountStorage
    let directory: TemporaryDirectory?
    let tenant: String?

    func close() {
        try? store.close()
        directory?.remove()
    }
}

/// One PostgreSQL server for the whole test process, started on first use: initdb takes a
/// second or two, a tenant per test costs nothing.
enum SharedTestDatabase {
    static let database = "blueskyd_tests"

    private static let started: Result<(server: PostgresServer, url: String, password: String), any Error> = Result {
        let server = try PostgresServer.start()
        let (url, password) = try SharedStoreHosts.createDatabase(database, on: server)
        atexit { SharedTestDatabase.stop() }
        return (server, url, password)
    }

    static var server: PostgresServer {
        get throws { try started.get().server }
    }

    static func settings(tenant: String, leaseDuration: TimeInterval = 60) throws -> PostgresStoreSettings {
        let (_, url, password) = try started.get()
        return try PostgresStoreSettings(url: url, password: password, tenant: tenant, leaseDuration: leaseDuration)
    }

    static func openStore(tenant: String, key: SymmetricKey, hostName: String = "test-host",
                          leaseDuration: TimeInterval = 60) throws -> PostgresAccountStore {
        try PostgresAccountStore(settings: settings(tenant: tenant, leaseDuration: leaseDuration), key: key,
                                 hostName: hostName, logger: Fixtures.logger)
    }

    /// A tenant no other test uses.
    static func freshTenant() -> String { "t\(UUID().uuidString.prefix(12).lowercased())" }

    /// Two hosts of one fresh tenant, with one store key, closed afterwards.
    static func withTwoHosts(_ body: (_ a: PostgresAccountStore, _ b: PostgresAccountStore) async throws -> Void)
        async throws {
        let key = SymmetricKey(size: .bits256)
        let tenant = freshTenant()
        let a = try openStore(tenant: tenant, key: key, hostName: "host-a")
        defer { try? a.close() }
        let b = try openStore(tenant: tenant, key: key, hostName: "host-b")
        defer { try? b.close() }
        try await body(a, b)
    }

    static func stop() {
        if case .success(let started) = started { started.server.destroy() }
    }
}
