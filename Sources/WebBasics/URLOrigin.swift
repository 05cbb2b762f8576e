/// The origin of an http(s) URL (RFC 6454 §4): scheme, host and port, written one way only.
///
/// Several things are keyed by origin and must agree on its spelling: DPoP nonces (RFC 9449 §8,
/// one per server), the `htu` of proofs, an account's PDS as discovery recorded it, the servers
/// a refresh goes to. So there is one normalisation: scheme and host in lower case, an IPv6
/// literal in brackets, and the port left out when it is the scheme's default.
public struct URLOrigin: Sendable, Hashable, CustomStringConvertible {
    /// `http` or `https`.
    public let scheme: String
    /// The host in lower case; an IPv6 literal keeps (or gains) its brackets.
    public let host: String
    /// The port, nil when it is the scheme's default.
    public let port: Int?

    /// Builds the origin from parts already taken out of a URL; nil for schemes other than
    /// http and https, and for an empty host.
    ///
    /// Callers parse URLs their own way (bytes for proofs, `URLComponents` for discovery), each
    /// with its own rules on what to refuse; only the spelling of the result is shared.
    public init?(scheme: some StringProtocol, host: some StringProtocol, port: Int?) {
        let scheme = Self.lowercased(scheme)
        guard let defaultPort = Self.defaultPort(scheme: scheme), !host.isEmpty else { return nil }
        let host = Self.lowercased(host)
        // Foundation gives an IPv6 literal with its brackets on some platforms and not on others.
        let bracketed = host.utf8.contains(UInt8(ascii: ":")) && !host.hasPrefix("[")
        self.scheme = scheme
        self.host = bracketed ? "[" + host + "]" : host
        self.port = port == defaultPort ? nil : port
    }

    /// The port a scheme implies when a URL names none: 443 for https, 80 for http.
    public static func defaultPort(scheme: some StringProtocol) -> Int? {
        // Without allocating: the keep-alive client asks on every request.
        func isScheme(_ name: StaticString) -> Bool {
            scheme.utf8.count == name.utf8CodeUnitCount
                && name.withUTF8Buffer { scheme.utf8.elementsEqual($0) { $0 | 0x20 == $1 } }
        }
        if isScheme("https") { return 443 }
        if isScheme("http") { return 80 }
        return nil
    }

    /// `host[:port]`, the port only when it is not the default.
    public var authority: String {
        port.map { host + ":" + String($0) } ?? host
    }

    /// `scheme://host[:port]`.
    public var string: String { scheme + "://" + authority }

    public var description: String { string }

    // ASCII only: URL schemes and hosts as these callers pass them are ASCII (an IDN host
    // arrives as punycode), and locale-aware lowercasing could map a byte outside it.
    private static func lowercased(_ text: some StringProtocol) -> String {
        let isUpper = { (byte: UInt8) in byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") }
        // The usual case, already lower case: no copy (each DPoP call parses its target twice).
        if !text.utf8.contains(where: isUpper) { return String(text) }
        return String(decoding: text.utf8.map { $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z") ? $0 | 0x20 : $0 },
               as: UTF8.self)
    }
}
