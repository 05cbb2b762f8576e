import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A stand-in for systemd's notification socket: an AF_UNIX datagram socket that records every
/// `sd_notify` message a child sends (pass `path` as its NOTIFY_SOCKET).
public final class NotifySocket: @unchecked Sendable {
    public let path: String
    private let fd: Int32
    private let lock = NSLock()
    private var received: [String] = []

    public init(path: String) throws {
        self.path = path
        fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw NotifySocketError("socket: \(String(cString: strerror(errno)))") }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { throw NotifySocketError("path too long") }
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard bound == 0 else { throw NotifySocketError("bind \(path): \(String(cString: strerror(errno)))") }
    }

    deinit {
        close(fd)
        unlink(path)
    }

    /// Every message so far, one entry per datagram, in arrival order.
    public var messages: [String] {
        lock.withLock {
            drain()
            return received
        }
    }

    /// Every assignment so far (`READY=1`, `STATUS=…`), datagrams split into lines, in order.
    public var assignments: [String] {
        messages.flatMap { $0.split(separator: "\n").map(String.init) }
    }

    /// Waits until a datagram after the first `after` ones satisfies `matches`; returns its
    /// index. Throws when `timeout` passes first, listing what did arrive.
    @discardableResult
    public func waitFor(after: Int = 0, timeout: Duration = .seconds(60),
                        _ what: String, _ matches: (String) -> Bool) async throws -> Int {
        let deadline = ContinuousClock.now + timeout
        while true {
            let all = messages
            if all.count > after, let index = all[after...].firstIndex(where: matches) { return index }
            guard ContinuousClock.now < deadline else {
                throw NotifySocketError("no \(what) within \(timeout); received: \(all)")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    /// Reads whatever datagrams are queued, without waiting; call with the lock held so that
    /// concurrent readers keep the arrival order.
    private func drain() {
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = recv(fd, &buffer, buffer.count, Int32(MSG_DONTWAIT))
            guard count > 0 else { return }
            let text = String(decoding: buffer[0..<count], as: UTF8.self)
            received.append(text)
        }
    }
}

public struct NotifySocketError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}
