import FoundationEssentials
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import JSONRPC

/// One connection to blueskyd, with every failure already mapped to a `CtlFailure`.
///
/// All use of the JSON-RPC client library is here, so the commands only see results and
/// bskyctl's own errors.
final class DaemonClient {
    let socketPath: String
    let connection: RPCClientConnection

    init(socketPath: String, timeout: Double) throws(CtlFailure) {
        self.socketPath = socketPath
        do {
            connection = try RPCClientConnection(socketPath: socketPath, timeout: .milliseconds(Int64((timeout * 1000).rounded())))
        } catch {
            throw Self.connectionFailure(error, socketPath: socketPath)
        }
    }

    /// Calls `method`; an RPC error comes back as the `.failure` value, connection trouble is thrown.
    func callForResult(_ method: String, _ params: JSONValue? = nil) throws(CtlFailure) -> Result<JSONValue, RPCError> {
        do {
            return try connection.call(method: method, params: params)
        } catch {
            throw Self.connectionFailure(error, socketPath: socketPath)
        }
    }

    /// Calls `method` and returns its result; an RPC error is thrown as a friendly failure.
    func call(_ method: String, _ params: JSONValue? = nil, context: RequestContext = RequestContext()) throws(CtlFailure) -> JSONValue {
        switch try callForResult(method, params) {
        case .success(let result): return result
        case .failure(let error): throw CtlFailure.from(error, context: context)
        }
    }

    /// The line and exit status for a failure to reach or talk to the daemon.
    static func connectionFailure(_ error: any Error, socketPath: String) -> CtlFailure {
        if let failure = error as? CtlFailure { return failure }
        guard let clientError = error as? RPCClientError else {
            return .requestFailed("talking to blueskyd at \(socketPath) failed: \(error)")
        }
        switch clientError {
        case .daemonNotRunning(let path):
            return CtlFailure(Self.notRunningMessage(path: path), status: .daemonUnavailable)
        case .permissionDenied(let path):
            return CtlFailure("permission denied: the socket \(path) belongs to another user's blueskyd", status: .permissionDenied)
        case .foreignPeer:
            return CtlFailure(clientError.description, status: .permissionDenied)
        case .connectionClosed:
            return .requestFailed("blueskyd closed the connection before replying")
        case .malformedReply(let detail):
            return .requestFailed("blueskyd sent a malformed reply: \(detail)")
        case .timedOut:
            return .requestFailed("blueskyd did not reply in time (see --timeout)")
        case .socketFailure:
            return .requestFailed("talking to blueskyd at \(socketPath): \(clientError)")
        }
    }

    /// What to say when nothing listens on the socket.
    static func notRunningMessage(path: String) -> String {
        var status = stat()
        let what = if stat(path, &status) != 0 {
            "no socket at \(path)"
        } else if status.st_mode & S_IFMT == S_IFSOCK {
            "nothing is listening on \(path): a socket left by a daemon that stopped"
        } else {
            "\(path) is not a socket"
        }
        return "blueskyd is not running (\(what)). Start it with `make run` or `systemctl --user start blueskyd`"
    }
}
