#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Why the server could not start listening.
public enum RPCServerError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Another process is already serving this socket path.
    case alreadyInUse(String)
    /// The socket's directory could be used by someone else (wrong owner, or group/other-writable).
    case insecureDirectory(path: String, reason: String)
    /// Something other than a socket sits at the socket path; it is left alone.
    case notASocket(String)
    /// The path does not fit in a `sockaddr_un`.
    case pathTooLong(String)
    /// A system call on the socket path failed.
    case systemCallFailed(path: String, operation: String, errno: Int32)

    public var description: String {
        switch self {
        case .alreadyInUse(let path):
            "another blueskyd is already listening on \(path)"
        case .insecureDirectory(let path, let reason):
            "refusing to use socket directory \(path): \(reason)"
        case .notASocket(let path):
            "\(path) exists and is not a socket; remove it or choose another socket path"
        case .pathTooLong(let path):
            "socket path is too long for a Unix socket (\(path.utf8.count) bytes): \(path)"
        case .systemCallFailed(let path, let operation, let code):
            "\(operation) \(path) failed: \(String(cString: strerror(code)))"
        }
    }
}
