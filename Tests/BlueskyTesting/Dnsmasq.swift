import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A private dnsmasq serving the TXT records (and A records) of one test on a free port of the
/// loopback. Point a DNS client at ``nameserver``. Stopped by ``stop()`` or when released.
public final class Dnsmasq: Sendable {
    public static let executable = "/usr/sbin/dnsmasq"

    public enum Failure: Error, CustomStringConvertible {
        case notInstalled
        case couldNotStart(reason: String, log: String)

        public var description: String {
            switch self {
            case .notInstalled: "\(Dnsmasq.executable) is not installed"
            case .couldNotStart(let reason, let log): "dnsmasq could not start: \(reason)\n\(log)"
            }
        }
    }

    public let listenAddress: String
    public let port: UInt16
    /// dnsmasq's log (every query is logged), handy in a failure message.
    public let logFile: String
    private let directory: String
    private let process: SpawnedProcess
    /// A name only this instance answers, so the readiness probe cannot be fooled by another
    /// server that already held the port.
    private let probeName: String

    /// `host:port` for a DNS client, e.g. `127.0.0.1:35353` or `[::1]:35353`.
    public var nameserver: String {
        listenAddress.contains(":") ? "[\(listenAddress)]:\(port)" : "\(listenAddress):\(port)"
    }

    /// The log written so far.
    public var log: String {
        (try? String(contentsOfFile: logFile, encoding: .utf8)) ?? ""
    }

    /// Starts dnsmasq answering `txtRecords` (one character-string each) and `addresses`
    /// (`domain` and its subdomains map to `ip`); every other name is NXDOMAIN.
    public static func start(
        txtRecords: [(name: String, value: String)],
        addresses: [(domain: String, ip: String)] = [],
        listenAddress: String = "127.0.0.1"
    ) async throws -> Dnsmasq {
        try await start(txtRecordStrings: txtRecords.map { (name: $0.name, strings: [$0.value]) },
                        addresses: addresses, listenAddress: listenAddress)
    }

    /// Like ``start(txtRecords:addresses:listenAddress:)``, but each TXT record may hold several
    /// character-strings (`strings`, each at most 255 bytes), as long DNS TXT values do.
    public static func start(
        txtRecordStrings: [(name: String, strings: [String])],
        addresses: [(domain: String, ip: String)] = [],
        listenAddress: String = "127.0.0.1"
    ) async throws -> Dnsmasq {
        guard FileManager.default.isExecutableFile(atPath: executable) else { throw Failure.notInstalled }
        var lastFailure = ""
        for _ in 0..<20 {
            let port = UInt16.random(in: 20_000...60_000)
            let instance = try Dnsmasq(port: port, listenAddress: listenAddress,
                                       txtRecords: txtRecordStrings, addresses: addresses)
            switch await instance.waitUntilAnswering() {
            case .answering:
                return instance
            case .portInUse:
                lastFailure = "port \(port) in use"
                continue
            case .failed(let reason):
                throw Failure.couldNotStart(reason: reason, log: instance.log)
            }
        }
        throw Failure.couldNotStart(reason: "no free port found (last: \(lastFailure))", log: "")
    }

    private init(port: UInt16, listenAddress: String,
                 txtRecords: [(name: String, strings: [String])], addresses: [(domain: String, ip: String)]) throws {
        directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("dnsmasq-\(UUID().uuidString.prefix(8))").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        self.port = port
        self.listenAddress = listenAddress
        self.logFile = directory + "/dnsmasq-\(port).log"
        let configFile = directory + "/dnsmasq-\(port).conf"
        probeName = "probe-\(UUID().uuidString.prefix(8).lowercased()).invalid"
        try Self.configuration(txtRecords: txtRecords, addresses: addresses + [(domain: probeName, ip: "127.0.0.1")])
            .write(toFile: configFile, atomically: true, encoding: .utf8)
        process = try SpawnedProcess(Self.executable, [
            "--keep-in-foreground", "--conf-file=\(configFile)",
            "--no-resolv", "--no-hosts", "--bind-interfaces",
            "--listen-address=\(listenAddress)", "--port=\(port)",
            "--user=root", "--pid-file=", "--log-facility=\(logFile)", "--log-queries",
        ], outputFile: directory + "/dnsmasq-\(port).stderr")
    }

    deinit {
        process.terminate()
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Stops dnsmasq; safe to call more than once.
    public func stop() {
        process.terminate()
    }

    /// A config file (not command-line options) so that quoted TXT strings keep commas and spaces.
    static func configuration(txtRecords: [(name: String, strings: [String])],
                              addresses: [(domain: String, ip: String)]) -> String {
        var lines: [String] = []
        for record in txtRecords {
            let strings = record.strings.map { "\"" + escaped($0) + "\"" }.joined(separator: ",")
            lines.append("txt-record=\(record.name),\(strings)")
        }
        for address in addresses {
            lines.append("address=/\(address.domain)/\(address.ip)")
        }
        // Everything not listed above: NXDOMAIN (instead of REFUSED for lack of upstream servers).
        lines.append("address=/#/")
        return lines.joined(separator: "\n") + "\n"
    }

    private static func escaped(_ value: String) -> String {
        value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
    }

    private enum StartOutcome { case answering, portInUse, failed(String) }

    /// Polls with a real DNS query until dnsmasq answers, or it exits, or 10 s pass. The whole
    /// wait runs on a Dispatch thread: tests that block the Swift concurrency pool for a while
    /// (a PostgreSQL server starting) would otherwise eat the 10 s of a dnsmasq that answered.
    private func waitUntilAnswering() async -> StartOutcome {
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(returning: self.waitUntilAnsweringBlocking()) }
        }
    }

    private func waitUntilAnsweringBlocking() -> StartOutcome {
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline {
            if !process.isRunning {
                let output = log + ((try? String(contentsOfFile: directory + "/dnsmasq-\(port).stderr", encoding: .utf8)) ?? "")
                return output.contains("in use") ? .portInUse : .failed("dnsmasq exited at start")
            }
            if DNSProbe.answers(host: listenAddress, port: port, name: probeName, timeoutMilliseconds: 100) {
                return .answering
            }
        }
        process.terminate()
        return .failed("dnsmasq did not answer on \(nameserver) within 10 s")
    }
}


/// Checks that a DNS server answers, with one tiny query over UDP (blocking: call it from a
/// Dispatch thread, never the Swift concurrency pool).
private enum DNSProbe {
    /// True when the server at `host:port` answers an A query for `name` with at least one record.
    static func answers(host: String, port: UInt16, name: String, timeoutMilliseconds: Int32) -> Bool {
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
