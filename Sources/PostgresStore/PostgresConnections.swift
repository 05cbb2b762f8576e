import AccountStoreCore
import Foundation
import Logging
import NIOCore
import NIOPosix
import NIOSSL
import PostgresNIO

/// How the store's connections are made: the pool's configuration, and the change listener's
/// own connection, which sits idle for hours and must notice a peer that vanished.
enum PostgresConnections {
    /// Durable commits whatever the server's default: a rotated refresh token that a crash
    /// could take back loses the account. Read committed whatever the role's default: the
    /// claims, the default's advisory lock and the conflict checks after an insert each need to
    /// see what other hosts committed a moment ago.
    static let startupParameters: [(String, String)] = [
        ("synchronous_commit", "on"), ("default_transaction_isolation", "read committed"),
        ("application_name", "blueskyd"),
        // blueskyd's tables are in `public`, and only there: the default path puts a schema
        // named like the role first, where anyone with CREATE on the database could place an
        // `account` view that captures the tenant's rows. Temporary tables come last.
        ("search_path", "public, pg_temp"),
    ]

    /// The pool's configuration: `store_connections` connections at most, 5 s to connect
    /// (TCP, TLS and authentication).
    static func clientConfiguration(_ settings: PostgresStoreSettings) throws(StoreError) -> PostgresClient.Configuration {
        var configuration = PostgresClient.Configuration(
            host: settings.host, port: settings.port, username: settings.user, password: settings.password,
            database: settings.database, tls: try PostgresTLS.clientMode(settings))
        configuration.options.connectTimeout = .seconds(5)
        configuration.options.maximumConnections = settings.maxConnections
        configuration.options.additionalStartupParameters = startupParameters
        return configuration
    }

    /// A connection of its own with TCP keepalive (probes after 15 s idle, 5 s apart, 3 lost
    /// ones end it) and a user timeout (data unacknowledged for 20 s ends it): a database host
    /// that vanished without a reset is found within a minute even while nothing is sent.
    static func dedicatedConnection(_ settings: PostgresStoreSettings, id: Int, logger: Logger) async throws -> PostgresConnection {
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connectTimeout(.seconds(5))
            .channelOption(.socketOption(.so_keepalive), value: 1)
            .channelOption(.tcpOption(.init(rawValue: LinuxTCP.keepIdle)), value: 15)
            .channelOption(.tcpOption(.init(rawValue: LinuxTCP.keepInterval)), value: 5)
            .channelOption(.tcpOption(.init(rawValue: LinuxTCP.keepCount)), value: 3)
            .channelOption(.tcpOption(.init(rawValue: LinuxTCP.userTimeout)), value: 20_000)
            .connect(host: settings.host, port: settings.port).get()
        var configuration = PostgresConnection.Configuration(
            establishedChannel: channel, tls: try PostgresTLS.connectionMode(settings), username: settings.user,
            password: settings.password, database: settings.database)
        // The name checked against the certificate (none is derived from an established
        // channel); an address is no server name.
        let isAddress = settings.host.contains(":") || settings.host.allSatisfy { $0.isNumber || $0 == "." }
        if !isAddress { configuration.options.tlsServerName = settings.host }
        configuration.options.connectTimeout = .seconds(5)
        configuration.options.additionalStartupParameters = startupParameters
        do {
            return try await PostgresConnection.connect(on: channel.eventLoop, configuration: configuration, id: id,
                                                        logger: logger)
        } catch {
            try? await channel.close()
            throw error
        }
    }
}

extension PostgresConnections {
    /// Connects once and hangs up: the pool waits for connections quietly, so this is how the
    /// reason a database cannot be reached (refused, a certificate, a password) is learnt.
    /// Returns nil when a connection was made.
    static func probe(_ settings: PostgresStoreSettings, logger: Logger) async -> String? {
        do {
            let connection = try await dedicatedConnection(settings, id: -1, logger: logger)
            try? await connection.close()
            return nil
        } catch {
            return PostgresErrorText.describe(error)
        }
    }
}

/// Linux's TCP socket options (netinet/tcp.h).
private enum LinuxTCP {
    static let keepIdle: CInt = 4
    static let keepInterval: CInt = 5
    static let keepCount: CInt = 6
    static let userTimeout: CInt = 18
}
