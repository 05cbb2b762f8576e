import BlueskyStore
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

    static func openStore(in directory: URL, key: SymmetricKey) throws -> AccountStore {
        try AccountStore(directory: directory, key: key, logger: logger)
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

extension AccountStorage {
    /// The outcome of a refresh that did not rotate the tokens, whatever their version (the
    /// daemon always fences on it): state and reason, the lease and mark cleared.
    func endRefresh(id: UUID, state: AccountState, reason: String?, at: Date) throws {
        try markState(id: id, state: state, reason: reason, at: at, endsRefresh: true)
    }

    /// A state change whatever the tokens' version.
    func markState(id: UUID, state: AccountState, reason: String?, at: Date = Date(), endsRefresh: Bool = false) throws {
        try markState(id: id, state: state, reason: reason, at: at, endsRefresh: endsRefresh, ifVersion: nil)
    }

    /// Claims the refresh lease over the stored tokens' version, as a refresh does first.
    @discardableResult
    func markRefreshStarted(id: UUID, at date: Date) throws -> RefreshClaim {
        try claimRefresh(id: id, expecting: try account(id: id)?.secretsVersion ?? 1, at: date)
    }

    /// Saves rotated tokens over the stored version, as a refresh that held the lease does.
    @discardableResult
    func saveRefreshedSession(id: UUID, secrets: AccountSecrets, accessExpiresAt: Date?, refreshExpiresAt: Date?,
                              at date: Date) throws -> Int64 {
        try saveRefreshedSession(id: id, secrets: secrets, accessExpiresAt: accessExpiresAt, refreshExpiresAt: refreshExpiresAt,
                                 at: date, replacing: try account(id: id)?.secretsVersion ?? 1)
    }
}
