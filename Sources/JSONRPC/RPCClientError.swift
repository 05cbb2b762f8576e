#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Why a call over the daemon's socket failed (as opposed to an error reply from a method).
public enum RPCClientError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Nothing listens at the socket path (no such file, or a stale socket).
    case daemonNotRunning(String)
    /// The socket is not ours to use (file permissions, or the daemon refused our uid).
    case permissionDenied(String)
    /// The process serving the socket runs as another user (nil: its uid could not be read):
    /// nothing was sent to it.
    case foreignPeer(String, uid: UInt32?)
    /// The daemon closed the connection before replying.
    case connectionClosed
    /// The daemon sent something that is not a JSON-RPC reply.
    case malformedReply(String)
    /// No reply within the timeout given when connecting.
    case timedOut
    /// Any other socket failure: the operation and errno.
    case socketFailure(operation: String, errno: Int32)

    public var description: String {
        switch self {
        case .daemonNotRunning(let path):
            "blueskyd is not running (nothing is listening on \(path))"
        case .permissionDenied(let path):
            "permission denied: \(path) belongs to another user's blueskyd"
        case .foreignPeer(let path, let uid):
            "permission denied: \(path) is served by \(uid.map { "uid \($0)" } ?? "an unknown user"), not by this user; nothing was sent"
        case .connectionClosed:
            "blueskyd closed the connection before replying"
        case .malformedReply(let detail):
            "blueskyd sent a malformed reply: \(detail)"
        case .timedOut:
            "blueskyd did not reply in time"
        case .socketFailure(let operation, let code):
            "\(operation) failed: \(String(cString: strerror(code)))"
        }
    }
}
