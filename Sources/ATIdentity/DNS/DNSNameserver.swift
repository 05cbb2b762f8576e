import Foundation
import NIOCore

/// A DNS server to ask: an IPv4 or IPv6 address and a port.
public struct DNSNameserver: Sendable, Hashable, CustomStringConvertible {
    /// An IP address literal (no brackets).
    public let host: String
    public let port: Int

    public init(host: String, port: Int = 53) throws(DNSError) {
        // A zone index (`fe80::1%eth0`) parses only where that interface exists; refuse it
        // everywhere so the same configuration means the same thing on every machine.
        guard (1...65535).contains(port), !host.contains("%"), (try? SocketAddress(ipAddress: host, port: port)) != nil else {
            throw .invalidNameserver("\(host):\(port)", reason: "not an IP address and port")
        }
        self.host = host
        self.port = port
    }

    /// Parses `192.0.2.1`, `192.0.2.1:5353`, `2001:db8::1` or `[2001:db8::1]:5353` (port 53 by default).
    public init(parsing text: String) throws(DNSError) {
        let text = text.trimmingCharacters(in: .whitespaces)
        if text.hasPrefix("["), let close = text.firstIndex(of: "]") {
            let host = String(text[text.index(after: text.startIndex)..<close])
            let rest = text[text.index(after: close)...]
            if rest.isEmpty {
                try self.init(host: host)
            } else if rest.hasPrefix(":"), let port = Int(rest.dropFirst()) {
                try self.init(host: host, port: port)
            } else {
                throw .invalidNameserver(text, reason: "expected [address]:port")
            }
        } else if text.filter({ $0 == ":" }).count == 1, let colon = text.firstIndex(of: ":") {
            guard let port = Int(text[text.index(after: colon)...]) else {
                throw .invalidNameserver(text, reason: "the port is not a number")
            }
            try self.init(host: String(text[..<colon]), port: port)
        } else {
            try self.init(host: text)  // IPv4 alone, or IPv6 without a port
        }
    }

    public var description: String {
        host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
    }

    var socketAddress: SocketAddress {
        get throws { try SocketAddress(ipAddress: host, port: port) }
    }

    /// The `nameserver` lines of a resolv.conf, as the system resolver uses them (port 53).
    /// Entries that are not plain IP addresses (e.g. with an interface scope) are skipped.
    static func fromResolvConf(contents: String) -> [DNSNameserver] {
        contents.split(whereSeparator: \.isNewline).compactMap { line in
            let fields = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
            guard fields.count >= 2, fields[0] == "nameserver" else { return nil }
            return try? DNSNameserver(host: String(fields[1]))
        }
    }
}
