import BlueskyStore
import NIOSSL
import PostgresNIO

/// libpq's `sslmode` as postgres-nio's TLS setting.
enum PostgresTLS {
    static func mode(_ settings: PostgresStoreSettings) throws(StoreError) -> PostgresConnection.Configuration.TLS {
        var tls = TLSConfiguration.makeClientConfiguration()
        switch settings.sslMode {
        case .disable:
            return .disable
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
        let context: NIOSSLContext
        do {
            context = try NIOSSLContext(configuration: tls)
        } catch {
            throw .unreachable(location: settings.location, reason: "cannot set up TLS: \(error)")
        }
        switch settings.sslMode {
        case .allow, .prefer: return .prefer(context)
        default: return .require(context)
        }
    }
}

/// postgres-nio's errors as one line a person can act on. `PSQLError`'s own description hides
/// everything on purpose (it may hold query text); the server's message and SQLSTATE say enough
/// and never hold bound values.
enum PostgresErrorText {
    static func describe(_ error: any Error) -> String {
        guard let error = error as? PSQLError else { return "\(error)" }
        if let message = error.serverInfo?[.message] {
            let state = error.serverInfo?[.sqlState].map { " (SQLSTATE \($0))" } ?? ""
            return message + state
        }
        if let underlying = error.underlying { return "\(error.code): \(underlying)" }
        return "\(error.code)"
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
        if let error = error as? StoreError, case .unreachable = error { return true }
        guard let error = error as? PSQLError else { return error is ChannelError || error is NIOSSLError }
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
