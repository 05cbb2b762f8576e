import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Checks that a DNS server answers, with one tiny query over UDP. The blocking socket calls
/// run on a Dispatch thread, never on the Swift concurrency pool.
enum DNSProbe {
    /// True when the server at `host:port` answers an A query for `name` with at least one record.
    static func answers(host: String, port: UInt16, name: String, timeoutMilliseconds: Int32) async -> Bool {
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(returning: answersBlocking(host: host, port: port, name: name,
                                                               timeoutMilliseconds: timeoutMilliseconds))
            }
        }
    }

    private static func answersBlocking(host: String, port: UInt16, name: String, timeoutMilliseconds: Int32) -> Bool {
        let isIPv6 = host.contains(":")
        let fd = socket(isIPv6 ? AF_INET6 : AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }

        let id = UInt16.random(in: 1...UInt16.max)
        // Header (id, RD, one question) + "<name>" A IN.
        var query: [UInt8] = [UInt8(id >> 8), UInt8(id & 0xff), 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]
        for label in name.split(separator: ".") {
            query.append(UInt8(label.utf8.count))
            query.append(contentsOf: label.utf8)
        }
        query += [0, 0, 1, 0, 1]

        let sent: Int
        if isIPv6 {
            var address = sockaddr_in6()
            address.sin6_family = sa_family_t(AF_INET6)
            address.sin6_port = port.bigEndian
            guard inet_pton(AF_INET6, host, &address.sin6_addr) == 1 else { return false }
            sent = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(fd, query, query.count, 0, $0, socklen_t(MemoryLayout<sockaddr_in6>.size))
                }
            }
        } else {
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = port.bigEndian
            guard inet_pton(AF_INET, host, &address.sin_addr) == 1 else { return false }
            sent = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(fd, query, query.count, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
        }
        guard sent == query.count else { return false }

        var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&descriptor, 1, timeoutMilliseconds) == 1 else { return false }
        var reply = [UInt8](repeating: 0, count: 512)
        let received = recv(fd, &reply, reply.count, 0)
        let answerCount = received >= 8 ? Int(reply[6]) << 8 | Int(reply[7]) : 0
        return reply[0] == UInt8(id >> 8) && reply[1] == UInt8(id & 0xff) && answerCount > 0
    }
}
