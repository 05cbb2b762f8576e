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
        socket(client: client, server: server)?.uid
    }

    /// The client's socket as the table shows it: its owner and its inode.
    static func socket(client: SocketAddress, server: SocketAddress) -> LoopbackClientSocket? {
        guard let clientKey = key(client), let serverKey = key(server) else { return nil }
        let table = clientKey.count > 13 ? "/proc/net/tcp6" : "/proc/net/tcp"
        guard let text = read(table) else { return nil }
        return socket(in: text, local: clientKey, remote: serverKey)
    }

    /// The uid on the row whose local address is `local` and remote address `remote` (both
    /// spelled as the table spells them, `0100007F:1F90`).
    static func uid(in table: String, local: String, remote: String) -> UInt32? {
        socket(in: table, local: local, remote: remote)?.uid
    }

    /// A row without an inode is a socket no process holds any more (its client closed it; the
    /// kernel finishes the close alone and shows uid 0 for it): its owner cannot be read, and
    /// nil says so, whatever uid the row shows.
    static func socket(in table: String, local: String, remote: String) -> LoopbackClientSocket? {
        for line in table.split(separator: "\n").dropFirst() {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count > 9, fields[1] == local, fields[2] == remote, let uid = UInt32(fields[7]) else { continue }
            guard let inode = UInt64(fields[9]), inode != 0 else { return nil }
            return LoopbackClientSocket(uid: uid, inode: inode)
        }
        return nil
    }

    /// The process holding the socket `inode` among `uid`'s (whose descriptors the daemon's
    /// user may read): `/proc/<pid>/fd/*` links to `socket:[<inode>]`. Nil once the client has
    /// closed it, or when /proc hides it. Reads /proc: call it off the event loops.
    static func process(holdingSocket inode: UInt64, uid: UInt32) -> Int32? {
        guard inode != 0, let processes = opendir("/proc") else { return nil }
        defer { closedir(processes) }
        let wanted = "socket:[\(inode)]"
        var link = [CChar](repeating: 0, count: 64)
        while let entry = readdir(processes) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            guard let pid = Int32(name) else { continue }
            var info = stat()
            guard stat("/proc/\(name)", &info) == 0, info.st_uid == uid, let fds = opendir("/proc/\(name)/fd") else { continue }
            defer { closedir(fds) }
            while let fd = readdir(fds) {
                let fdName = withUnsafeBytes(of: fd.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
                guard fdName.first?.isNumber == true else { continue }
                let length = readlink("/proc/\(name)/fd/\(fdName)", &link, link.count - 1)
                guard length > 0 else { continue }
                if String(decoding: link[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self) == wanted { return pid }
            }
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

/// A loopback TCP client's socket, as the kernel's socket table shows it.
public struct LoopbackClientSocket: Sendable, Hashable {
    public var uid: UInt32
    /// Its inode: what `/proc/<pid>/fd` links of the process holding it name.
    public var inode: UInt64
}
