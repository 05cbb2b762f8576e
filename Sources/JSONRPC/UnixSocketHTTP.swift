#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One plain HTTP/1.0 GET over a Unix socket of the daemon's (its metrics socket), for bskyctl:
/// the same checks as the JSON-RPC client's connection (the peer runs as this user).
public enum UnixSocketHTTP {
    /// The answer's status and body.
    public static func get(path: String, target: String, timeout: Duration) throws -> (status: Int, body: [UInt8]) {
        let fd = try UnixSocketClient.connect(path: path)
        defer { UnixSocketClient.closeDescriptor(fd) }
        try UnixSocketClient.setTimeout(fd: fd, timeout)
        let request = Array("GET \(target) HTTP/1.0\r\nHost: localhost\r\n\r\n".utf8)
        var sent = 0
        while sent < request.count {
            let count = request[sent...].withUnsafeBytes { bytes in
                UnixSocketClient.retryingOnInterrupt { write(fd, bytes.baseAddress, bytes.count) }
            }
            guard count > 0 else { throw RPCClientError.socketFailure(operation: "write to \(path)", errno: errno) }
            sent += count
        }
        var answer: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = buffer.withUnsafeMutableBytes { bytes in
                UnixSocketClient.retryingOnInterrupt { read(fd, bytes.baseAddress, bytes.count) }
            }
            if count == 0 { break }
            guard count > 0 else {
                if errno == EAGAIN || errno == EWOULDBLOCK { throw RPCClientError.timedOut }
                throw RPCClientError.socketFailure(operation: "read from \(path)", errno: errno)
            }
            answer += buffer[0..<count]
        }
        // "HTTP/1.1 200 OK\r\n...\r\n\r\nbody"
        guard let end = answer.firstRange(of: Array("\r\n\r\n".utf8)),
              let status = String(decoding: answer[..<end.lowerBound], as: UTF8.self)
                  .split(separator: " ", maxSplits: 2).dropFirst().first.flatMap({ Int($0) }) else {
            throw RPCClientError.socketFailure(operation: "read an HTTP answer from \(path)", errno: EPROTO)
        }
        return (status, Array(answer[end.upperBound...]))
    }
}
