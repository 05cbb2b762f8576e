import AccountStoreCore
import SQLiteStore
import Crypto
import Foundation
import Logging

/// A fresh directory under /tmp, removed by `remove()`.
struct TemporaryDirectory {
    let url: URL

    init() throws {
        url = URL(fileURLWithPath: NSTemporaryDirectory())
            .appendingPathComponent("blueskystore-tests-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    var path: String { url.path }

    func appending(_ component: String) -> URL { url.appendingPathComponent(component) }

    func remove() {
        try? FileManager.default.removeItem(at: url)
    }
}

enum Fixtures {
    static let logger: Logger = {
        var logger = Logger(label: "BlueskyStoreTests")
        logger.logLevel = .warning
        return logger
    }()

    static func openStore(in directory: URL, key: SymmetricKey) throws -> SQLiteAccountStore {
        try SQLiteAccountStore(directory: directory, key: key, logger: logger)
    }

    static func record(
        did: String = "did:plc:\(UUID().uuidString.prefix(24).lowercased())",
        handle: String? = nil,
        createdAt: Date = Date(),
        isDefault: Bool = false
    ) -> AccountRecord {
        AccountRecord(
            did: did, handle: handle ?? "user-\(UUID().uuidString.prefix(8).lowercased()).test",
            handleVerified: true, pds: "https://pds.example.test", authKind: .appPassword,
            isDefault: isDefault, createdAt: createdAt)
    }

    /// Secrets with tokens unique to this call, so a leak is found by a byte search.
    static func secrets() -> AccountSecrets {
        AccountSecrets(
            accessToken: "access-\(UUID().uuidString)-token",
            refreshToken: "refresh-\(UUID().uuidString)-token")
    }

    static func bytes(of key: SymmetricKey) -> Data {
        key.withUnsafeBytes { Data($0) }
    }

    static func permissions(of path: String) throws -> Int {
        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        return (attributes[.posixPermissions] as? NSNumber)?.intValue ?? -1
    }
}

extension Data {
    func contains(_ needle: String) -> Bool {
        range(of: Data(needle.utf8)) != nil
    }
}

extension AccountStore {
    /// The outcome of a refresh that did not rotate the tokens, whatever their version (the
    /// daemon always fences on it): state and reason, the lease and mark cleared.
    func endRefresh(id: UUID, state: AccountState, reason: String?, at: Date) async throws {
        try await markState(id: id, state: state, reason: reason, at: at, lease: .release, ifVersion: nil)
    }

    /// A state change whatever the tokens' version.
    func markState(id: UUID, state: AccountState, reason: String?, at: Date = Date(), lease: LeaseRelease = .keep) async throws {
        try await markState(id: id, state: state, reason: reason, at: at, lease: lease, ifVersion: nil)
    }

    /// Claims the refresh lease over the stored tokens' version, as a refresh does first.
    @discardableResult
    func markRefreshStarted(id: UUID, at date: Date) async throws -> RefreshClaim {
        try await claimRefresh(id: id, expecting: try await account(id: id)?.secretsVersion ?? 1, at: date)
    }

    /// Saves rotated tokens over the stored version, as a refresh that held the lease does.
    @discardableResult
    func saveRefreshedSession(id: UUID, secrets: AccountSecrets, accessExpiresAt: Date?, refreshExpiresAt: Date?,
                              at date: Date) async throws -> Int64 {
        try await saveRefreshedSession(id: id, secrets: secrets, accessExpiresAt: accessExpiresAt, refreshExpiresAt: refreshExpiresAt,
                                       at: date, replacing: try await account(id: id)?.secretsVersion ?? 1)
    }

    /// Saves rotated tokens over `version`, the refresh's answer changing nothing else.
    @discardableResult
    func saveRefreshedSession(id: UUID, secrets: AccountSecrets, accessExpiresAt: Date?, refreshExpiresAt: Date?,
                              at date: Date, replacing version: Int64) async throws -> Int64 {
        try await saveRefreshedSession(id: id, secrets: secrets, accessExpiresAt: accessExpiresAt, refreshExpiresAt: refreshExpiresAt,
                                       scope: nil, handle: nil, at: date, replacing: version)
    }

    /// The default account, or nil when none is set.
    func defaultAccount() async throws -> AccountRecord? {
        try await allAccounts().first { $0.isDefault }
    }

    /// Accounts recorded with this handle (several can claim one until verification settles it).
    func accounts(handle: String) async throws -> [AccountRecord] {
        try await allAccounts().filter { $0.handle == handle }
    }

    func setProfile(id: UUID, _ profile: AccountProfile?) async throws { try await setProfile(id: id, profile, at: Date()) }
    func setDefault(id: UUID) async throws { try await setDefault(id: id, at: Date()) }
    func clearDefault() async throws { try await clearDefault(at: Date()) }
}
