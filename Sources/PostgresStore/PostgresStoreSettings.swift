import AccountStoreCore
import Foundation

/// Where the shared store is and how to reach it, from `store_url` and its companions.
///
/// The URL is libpq's: `postgresql://user@host:5432/database?sslmode=verify-full&sslrootcert=/path`.
/// The password never travels in it (a URL ends up in `ps`, logs and shell histories): it comes
/// from a file or a systemd credential.
public struct PostgresStoreSettings: Sendable, Equatable {
    /// libpq's `sslmode`, with libpq's meaning.
    public enum SSLMode: String, Sendable, CaseIterable {
        /// Plain TCP only.
        case disable
        /// TLS if the server offers it, else plain; no certificate check (libpq tries plain first).
        case allow
        /// TLS if the server offers it, else plain; no certificate check. libpq's default.
        case prefer
        /// TLS or nothing; the certificate is not checked.
        case require
        /// TLS, and the server's certificate must chain to `sslrootcert` (or the system's roots).
        case verifyCA = "verify-ca"
        /// As `verify-ca`, and the certificate must name the host.
        case verifyFull = "verify-full"
    }

    public var host: String
    public var port: Int
    public var user: String
    public var database: String
    public var password: String?
    public var sslMode: SSLMode
    /// PEM file of the CA certificates the server's certificate must chain to.
    public var sslRootCertificateFile: String?
    /// Whose accounts this daemon keeps: accounts of other tenants in the same database are
    /// invisible to it. A Unix user name, or the name a shared service is configured with.
    public var tenant: String
    /// How long a refresh lease holds before another host may take the account over.
    public var leaseDuration: TimeInterval
    /// Connections to keep open for queries (the change listener has one more of its own).
    public var maxConnections: Int
    /// How long one operation may take, waiting for a connection included, before it fails and
    /// its connection is closed (a database that stopped answering).
    public var statementTimeout: TimeInterval = 30

    public init(url: String, password: String?, tenant: String, leaseDuration: TimeInterval = 60,
                maxConnections: Int = 4) throws(StoreError) {
        let parsed = try Self.parse(url)
        self.host = parsed.host
        self.port = parsed.port
        self.user = parsed.user
        self.database = parsed.database
        self.sslMode = parsed.sslMode
        self.sslRootCertificateFile = parsed.rootCertificates
        self.password = password
        guard Self.isValidTenant(tenant) else {
            throw .invalidSetting("the tenant \"\(tenant)\" must be 1 to 64 letters, digits, '.', '_' or '-'")
        }
        self.tenant = tenant
        self.leaseDuration = leaseDuration
        self.maxConnections = max(1, maxConnections)
    }

    /// The URL without a password, for logs and messages.
    public var location: String { "postgresql://\(user)@\(host):\(port)/\(database)" }

    /// Unix user names and configured service names; nothing a NOTIFY payload could trip on.
    public static func isValidTenant(_ name: String) -> Bool {
        (1...64).contains(name.utf8.count)
            && name.utf8.allSatisfy { $0.isASCIILetterOrDigit || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: "-") }
    }

    private static func parse(_ text: String) throws(StoreError) -> (host: String, port: Int, user: String, database: String,
                                                                     sslMode: SSLMode, rootCertificates: String?) {
        func refuse(_ reason: String) -> StoreError { .invalidSetting(reason) }
        guard let components = URLComponents(string: text),
              let scheme = components.scheme?.lowercased(), ["postgresql", "postgres"].contains(scheme)
        else { throw refuse("store_url must look like postgresql://user@host:5432/database") }
        guard components.password == nil else {
            throw refuse("store_url must not carry a password: put it in store_password_file or the systemd credential blueskyd-store-password")
        }
        guard let user = components.user, !user.isEmpty else { throw refuse("store_url names no user (postgresql://USER@host/database)") }
        guard let host = components.host, !host.isEmpty else { throw refuse("store_url names no host") }
        let database = String(components.path.drop(while: { $0 == "/" }))
        guard !database.isEmpty, !database.contains("/") else { throw refuse("store_url names no database (postgresql://user@host/DATABASE)") }
        var sslMode = SSLMode.prefer
        var rootCertificates: String?
        for item in components.queryItems ?? [] {
            switch item.name {
            case "sslmode":
                guard let mode = item.value.flatMap(SSLMode.init(rawValue:)) else {
                    throw refuse("sslmode must be one of \(SSLMode.allCases.map(\.rawValue).joined(separator: ", "))")
                }
                sslMode = mode
            case "sslrootcert":
                rootCertificates = item.value
            case "application_name", "connect_timeout":
                continue
            default:
                throw refuse("unknown store_url parameter \"\(item.name)\" (known: sslmode, sslrootcert)")
            }
        }
        return (host, components.port ?? 5432, user, database, sslMode, rootCertificates)
    }
}

private extension UInt8 {
    var isASCIILetterOrDigit: Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(self) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(self)
            || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(self)
    }
}

extension PostgresStoreSettings: CustomStringConvertible, CustomDebugStringConvertible {
    /// Never the password: settings end up in logs and error messages.
    public var description: String { "\(location) (sslmode \(sslMode.rawValue), tenant \(tenant))" }
    public var debugDescription: String { description }
}
