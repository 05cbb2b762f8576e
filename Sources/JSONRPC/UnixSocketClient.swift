#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The POSIX calls behind `RPCClientConnection`.
enum UnixSocketClient {
    /// Opens a stream socket connected to `path`, mapping failures to `RPCClientError`.
    static func connect(path: String) throws -> Int32 {
        #if canImport(Glibc)
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        #else
        let fd = socket(AF_UNIX, SOCK_STREAM, 0)
        #endif
        guard fd >= 0 else { throw RPCClientError.socketFailure(operation: "socket", errno: errno) }
        #if canImport(Darwin)
        var one: Int32 = 1
        _ = setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, socklen_t(MemoryLayout<Int32>.size))
        #endif
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let pathBytes = Array(path.utf8)
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard !pathBytes.isEmpty, pathBytes.count < capacity else {
            closeDescriptor(fd)
            throw RPCClientError.socketFailure(operation: "connect to \(path)", errno: ENAMETOOLONG)
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: pathBytes)
        }
        let result = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress in
                retryingOnInterrupt { Int(systemConnect(fd, socketAddress, socklen_t(MemoryLayout<sockaddr_un>.size))) }
            }
        }
        guard result == 0 else {
            let code = errno
            closeDescriptor(fd)
            switch code {
            case ENOENT, ECONNREFUSED, ENOTDIR: throw RPCClientError.daemonNotRunning(path)
            case EACCES, EPERM: throw RPCClientError.permissionDenied(path)
            default: throw RPCClientError.socketFailure(operation: "connect to \(path)", errno: code)
            }
        }
        // Whoever answers will be sent passwords: it must run as this user. A socket another
        // user created first (in /tmp, say) is refused before a byte is written.
        let peer = peerUID(fd)
        guard peer == geteuid() else {
            closeDescriptor(fd)
            throw RPCClientError.foreignPeer(path, uid: peer)
        }
        return fd
    }

    /// The uid of the process at the other end; nil when the system cannot tell.
    static func peerUID(_ fd: Int32) -> UInt32? {
        #if canImport(Glibc)
        // Linux's `struct ucred` (pid, uid, gid), which Glibc's overlay hides behind _GNU_SOURCE.
        var credentials: (pid: Int32, uid: UInt32, gid: UInt32) = (0, 0, 0)
        var length = socklen_t(MemoryLayout<(Int32, UInt32, UInt32)>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) == 0 else { return nil }
        return credentials.uid
        #else
        var uid: uid_t = 0
        var gid: gid_t = 0
        guard getpeereid(fd, &uid, &gid) == 0 else { return nil }
        return uid
        #endif
    }

    /// Sets both the receive and the send timeout.
    static func setTimeout(fd: Int32, _ timeout: Duration) throws {
        let (seconds, attoseconds) = timeout.components
        var value = timeval(tv_sec: .init(seconds), tv_usec: .init(attoseconds / 1_000_000_000_000))
        if value.tv_sec == 0 && value.tv_usec == 0 { value.tv_usec = 1 }  // zero would mean "forever"
        for option in [SO_RCVTIMEO, SO_SNDTIMEO] {
            guard setsockopt(fd, SOL_SOCKET, option, &value, socklen_t(MemoryLayout<timeval>.size)) == 0 else {
                throw RPCClientError.socketFailure(operation: "setsockopt", errno: errno)
            }
        }
    }

    static func sendWithoutSignal(_ fd: Int32, _ bytes: UnsafeRawPointer, _ count: Int) -> Int {
        #if canImport(Glibc)
        send(fd, bytes, count, Int32(MSG_NOSIGNAL))
        #else
        send(fd, bytes, count, 0)
        #endif
    }

    static func closeDescriptor(_ fd: Int32) {
        _ = systemClose(fd)
    }

    /// Maps a read or write errno to the error a caller can act on.
    static func ioError(_ operation: String, _ code: Int32) -> RPCClientError {
        switch code {
        case EAGAIN, EWOULDBLOCK: .timedOut
        case EPIPE, ECONNRESET: .connectionClosed
        default: .socketFailure(operation: operation, errno: code)
        }
    }

    static func retryingOnInterrupt(_ call: () -> Int) -> Int {
        while true {
            let result = call()
            if result >= 0 || errno != EINTR { return result }
        }
    }
}

private func systemConnect(_ fd: Int32, _ address: UnsafePointer<sockaddr>, _ length: socklen_t) -> Int32 {
    connect(fd, address, length)
}

private func systemClose(_ fd: Int32) -> Int32 {
    close(fd)
}
