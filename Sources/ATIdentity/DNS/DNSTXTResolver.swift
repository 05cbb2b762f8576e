import Foundation
import Logging
import NIOCore

/// Looks up DNS TXT records by asking DNS servers directly (UDP, then TCP when the answer is
/// truncated). Used for `_atproto.<handle>`, which the system's getaddrinfo cannot query.
public struct DNSTXTResolver: Sendable {
    /// Where the DNS servers come from.
    public enum Nameservers: Sendable, Equatable {
        /// The `nameserver` lines of a resolv.conf, read at each lookup so changes apply at once.
        case system(resolvConf: String = "/etc/resolv.conf")
        /// A fixed list (configuration, or a test's dnsmasq).
        case fixed([DNSNameserver])
    }

    public var nameservers: Nameservers
    /// How long to wait for each answer.
    public var timeout: Duration
    /// Tries per server before moving to the next (1 = no retry).
    public var attemptsPerServer: Int
    public var logger: Logger

    public init(nameservers: Nameservers = .system(), timeout: Duration = .seconds(2), attemptsPerServer: Int = 2,
                logger: Logger = Logger(label: "blueskyd.dns")) {
        self.nameservers = nameservers
        self.timeout = timeout
        self.attemptsPerServer = max(1, attemptsPerServer)
        self.logger = logger
    }

    /// Uses the configured `host:port` servers, or the system's when `configured` is empty.
    public init(nameservers configured: [String], timeout: Duration = .seconds(2),
                logger: Logger = Logger(label: "blueskyd.dns")) throws(DNSError) {
        if configured.isEmpty {
            self.init(timeout: timeout, logger: logger)
        } else {
            var servers: [DNSNameserver] = []
            for text in configured { servers.append(try DNSNameserver(parsing: text)) }
            self.init(nameservers: .fixed(servers), timeout: timeout, logger: logger)
        }
    }

    /// The TXT values at `name` (each record's strings concatenated), or `[]` when the name or
    /// the record does not exist (NXDOMAIN, or NOERROR without TXT). Throws only when no server
    /// gave an answer.
    public func lookupTXT(_ name: String) async throws(DNSError) -> [String] {
        let servers = try currentNameservers()
        do {
            _ = try DNSQuery(name: name, type: DNSRecordType.txt).encoded()
        } catch {
            throw .invalidName(name, reason: error.description)
        }
        var failures: [String] = []
        for server in servers {
            switch await ask(server, for: name) {
            case .success(let values):
                return values
            case .failure(let reason):
                logger.debug("DNS server did not answer", metadata: ["server": "\(server)", "name": "\(name)", "reason": "\(reason)"])
                failures.append("\(server): \(reason)")
            }
        }
        throw .lookupFailed(name: name, attempts: failures)
    }

    private enum ServerOutcome {
        case success([String])
        case failure(String)
    }

    /// Asks one server, retrying on timeouts and network errors; a definite failure code
    /// (SERVFAIL, REFUSED, ...) moves on to the next server at once.
    private func ask(_ server: DNSNameserver, for name: String) async -> ServerOutcome {
        let address: SocketAddress
        do {
            address = try server.socketAddress
        } catch {
            return .failure("invalid address: \(error)")
        }
        var lastFailure = ""
        for _ in 0..<attemptsPerServer {
            if Task.isCancelled { return .failure("cancelled") }
            do {
                let query = DNSQuery(name: name, type: DNSRecordType.txt)
                var response = try await DNSTransport.exchangeOverUDP(query, with: address, timeout: timeout)
                if response.isTruncated {
                    logger.debug("DNS answer truncated, asking again over TCP", metadata: ["server": "\(server)", "name": "\(name)"])
                    let tcpQuery = DNSQuery(name: name, type: DNSRecordType.txt)
                    response = try await DNSTransport.exchangeOverTCP(tcpQuery, with: address, timeout: timeout)
                }
                switch response.responseCode {
                case DNSResponseCode.noError:
                    return .success(response.txtValues(for: name))
                case DNSResponseCode.nameError:
                    return .success([])
                case DNSResponseCode.serverFailure:
                    return .failure("server failure (SERVFAIL)")
                case DNSResponseCode.refused:
                    return .failure("query refused (REFUSED)")
                case let code:
                    return .failure("error response code \(code)")
                }
            } catch {
                lastFailure = "\(error)"
            }
        }
        return .failure(lastFailure)
    }

    private func currentNameservers() throws(DNSError) -> [DNSNameserver] {
        switch nameservers {
        case .fixed(let servers):
            guard !servers.isEmpty else { throw .noNameservers(source: "the configuration") }
            return servers
        case .system(let path):
            let contents = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
            let servers = DNSNameserver.fromResolvConf(contents: contents)
            guard !servers.isEmpty else { throw .noNameservers(source: path) }
            return servers
        }
    }
}
