#if canImport(Glibc)
import Glibc
#endif
import NIOCore

/// Who owns the other end of a loopback TCP connection: the kernel's socket table
/// (`/proc/net/tcp`, `/proc/net/tcp6`) lists the client's socket, with our address as its
/// remote one and the uid that made it. TCP has no peer credentials; this is how a loopback
/// listener tells the daemon's user from everyone else on the machine.
enum LoopbackPeerOwner {
    /// The uid owning the socket connected from `client` to `server`, or nil when the table
    /// does not show it (another network namespace, a /proc mounted with hidepid, a client
    /// that already left). Reads /proc: call it off the event loops.
    static func uid(client: SocketAddress, server: SocketAddress) -> UInt32? {
        guard let clientKey = key(client), let serverKey = key(server) else { return nil }
        let table = clientKey.count > 13 ? "/proc/net/tcp6" : "/proc/net/tcp"
        guard let text = read(table) else { return nil }
        return uid(in: text, local: clientKey, remote: serverKey)
    }

    /// The uid on the row whose local address is `local` and remote address `remote` (both
    /// spelled as the table spells them, `0100007F:1F90`).
    static func uid(in table: String, local: String, remote: String) -> UInt32? {
        for line in table.split(separator: "\n").dropFirst() {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count > 7, fields[1] == local, fields[2] == remote else { continue }
            return UInt32(fields[7])
        }
        return nil
    }

    /// An address as /proc/net/tcp{,6} writes it: the address as 32-bit words in host (little
    /// endian) order, then the port, in upper-case hex.
    static func key(_ address: SocketAddress) -> String? {
        guard let ip = address.ipAddress, let port = address.port else { return nil }
        var bytes: [UInt8]
        switch address.protocol {
        case .inet:
            var raw = in_addr()
            guard inet_pton(AF_INET, ip, &raw) == 1 else { return nil }
            bytes = withUnsafeBytes(of: raw) { Array($0) }
        case .inet6:
            var raw = in6_addr()
            guard inet_pton(AF_INET6, ip, &raw) == 1 else { return nil }
            bytes = withUnsafeBytes(of: raw) { Array($0) }
        default:
            return nil
        }
        return key(addressBytes: bytes, port: port)
    }

    /// `bytes` in network order (4 or 16), each 32-bit word written least significant byte first.
    static func key(addressBytes bytes: [UInt8], port: Int) -> String {
        var text = ""
        for word in stride(from: 0, to: bytes.count, by: 4) {
            for byte in bytes[word..<word + 4].reversed() { text += hex(byte) }
        }
        return text + ":" + hex(UInt8(port >> 8)) + hex(UInt8(port & 0xFF))
    }

    private static func hex(_ byte: UInt8) -> String {
        let digits = Array("0123456789ABCDEF")
        return String([digits[Int(byte >> 4)], digits[Int(byte & 0xF)]])
    }

    private static func read(_ path: String) -> String? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var data: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { break }
            data += chunk[0..<count]
        }
        return String(decoding: data, as: UTF8.self)
    }
}
