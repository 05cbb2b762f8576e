/// Failures of a DNS TXT lookup. "No such record" is not one of them: it is an empty answer.
public enum DNSError: Error, Sendable, Equatable, CustomStringConvertible {
    case invalidNameserver(String, reason: String)
    case noNameservers(source: String)
    case invalidName(String, reason: String)
    /// Every server failed; one entry per server tried, saying how.
    case lookupFailed(name: String, attempts: [String])

    public var description: String {
        switch self {
        case .invalidNameserver(let server, let reason):
            "invalid DNS server \"\(server)\": \(reason)"
        case .noNameservers(let source):
            "no DNS servers to ask (none in \(source))"
        case .invalidName(let name, let reason):
            "cannot look up \(name) in DNS: \(reason)"
        case .lookupFailed(let name, let attempts):
            "DNS TXT lookup of \(name) failed: \(attempts.joined(separator: "; "))"
        }
    }

    /// Server failures may pass; configuration and name errors will not.
    public var isTransient: Bool {
        if case .lookupFailed = self { return true }
        return false
    }
}
