import AccountStoreCore
import NIOSSL
import PostgresNIO

/// libpq's `sslmode` as postgres-nio's TLS settings (the pool's and a single connection's).
enum PostgresTLS {
    /// The TLS settings of `sslmode`, or nil when it is `disable`.
    static func configuration(_ settings: PostgresStoreSettings) throws(StoreError) -> TLSConfiguration? {
        var tls = TLSConfiguration.makeClientConfiguration()
        switch settings.sslMode {
        case .disable:
            return nil
        case .allow, .prefer, .require:
            // libpq checks nothing in these modes: they protect against eavesdropping only.
            tls.certificateVerification = .none
        case .verifyCA:
            tls.certificateVerification = .noHostnameVerification
        case .verifyFull:
            tls.certificateVerification = .fullVerification
        }
        if let file = settings.sslRootCertificateFile {
            do {
                tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMFile(file))
            } catch {
                throw .unreachable(location: settings.location, reason: "cannot read sslrootcert \(file): \(error)")
            }
        }
        // A server that vanished mid-handshake must not hold a close for long.
        tls.shutdownTimeout = .seconds(1)
        return tls
    }

    /// Whether TLS is only preferred (libpq's `allow` and `prefer` fall back to plain TCP).
    private static func prefersOnly(_ settings: PostgresStoreSettings) -> Bool {
        settings.sslMode == .allow || settings.sslMode == .prefer
    }

    static func clientMode(_ settings: PostgresStoreSettings) throws(StoreError) -> PostgresClient.Configuration.TLS {
        guard let tls = try configuration(settings) else { return .disable }
        // Built once here so that a bad CA file is reported at start, not at the first connection.
        do {
            _ = try NIOSSLContext(configuration: tls)
        } catch {
            throw .unreachable(location: settings.location, reason: "cannot set up TLS: \(error)")
        }
        return prefersOnly(settings) ? .prefer(tls) : .require(tls)
    }

    static func connectionMode(_ settings: PostgresStoreSettings) throws(StoreError) -> PostgresConnection.Configuration.TLS {
        guard let tls = try configuration(settings) else { return .disable }
        let context: NIOSSLContext
        do {
            context = try NIOSSLContext(configuration: tls)
        } catch {
            throw .unreachable(location: settings.location, reason: "cannot set up TLS: \(error)")
        }
        return prefersOnly(settings) ? .prefer(context) : .require(context)
    }
}

/// postgres-nio's errors as one line a person can act on. `PSQLError`'s own description hides
/// everything on purpose (it may hold query text); the server's message and SQLSTATE say enough
/// and never hold bound values.
enum PostgresErrorText {
    static func describe(_ error: any Error) -> String {
        guard let error = error as? PSQLError else { return describePool(error) }
        if let message = error.serverInfo?[.message] {
            let state = error.serverInfo?[.sqlState].map { " (SQLSTATE \($0))" } ?? ""
            return message + state
        }
        if let underlying = error.underlying { return "\(error.code): \(underlying)" }
        return "\(error.code)"
    }

    /// The pool's own errors (`ConnectionPoolError`, whose module postgres-nio does not
    /// promise), said plainly.
    private static func describePool(_ error: any Error) -> String {
        let text = String(describing: error)
        if text.contains("connectionCreationCircuitBreakerTripped") {
            return "no connection to the database could be made for a minute (still trying)"
        }
        if text.contains("poolShutdown") { return "the store is closed" }
        if text.contains("requestCancelled") || error is CancellationError { return "waiting for a connection was given up" }
        return text
    }

    /// The server's SQLSTATE, e.g. "23505" for a unique violation.
    static func sqlState(_ error: any Error) -> String? {
        (error as? PSQLError)?.serverInfo?[.sqlState]
    }

    /// Whether the statement lost a race rather than met a broken store: a constraint it would
    /// break (class 23) or a transaction the server rolled back (class 40: serialization
    /// failure, deadlock). The write fails; the store is no less writable for it.
    static func isConflict(_ error: any Error) -> Bool {
        guard let state = sqlState(error) else { return false }
        return state.hasPrefix("23") || state.hasPrefix("40")
    }

    /// Whether the error is the connection's, not the statement's: the database is unreachable.
    static func isConnectionLoss(_ error: any Error) -> Bool {
        if let error = error as? StoreError {
            if case .unreachable = error { return true }
            return false
        }
        // A caller that gave up (a stop cancelling background work) or a row this code could
        // not decode says nothing about the database.
        if error is CancellationError || error is PostgresDecodingError { return false }
        if String(describing: error).contains("requestCancelled") { return false }
        // Anything else but the server's own answer is about reaching it: the deadline closed
        // the connection, the pool could not connect or is closing, the network or TLS failed.
        guard let error = error as? PSQLError else { return true }
        switch error.code {
        case .server:
            // Admin shutdown, crash recovery, "the database system is starting up".
            guard let state = error.serverInfo?[.sqlState] else { return false }
            return state.hasPrefix("57P") || state.hasPrefix("08")
        case .queryCancelled, .messageDecodingFailure, .invalidCommandTag, .tooManyParameters:
            return false
        default:
            return true
        }
    }
}
