import Foundation
import WebBasics

/// The `htu` of a proof (RFC 9449 §4.2): the request URI without query and fragment, with the
/// scheme and host lowercased and the port dropped when it is the scheme's default.
///
/// Strict servers compare `htu` by string after this same normalisation; sending the query
/// string is a classic cause of rejected proofs.
public struct HTTPTargetURI: Sendable, Hashable, CustomStringConvertible {
    /// The normalised URI, e.g. `https://pds.example.com/xrpc/app.bsky.actor.getProfile`.
    public let string: String
    /// `scheme://host[:port]` as ``URLOrigin`` writes it, the key of per-server state such as nonces.
    public let origin: String

    public var description: String { string }

    /// Normalises `url`; throws for anything that is not an absolute http(s) URL with a host.
    public init(_ url: URL) throws(DPoPError) {
        try self.init(url.absoluteString)
    }

    /// Normalises a URL given as text.
    public init(_ text: String) throws(DPoPError) {
        let bytes = Array(text.utf8)
        guard let schemeEnd = bytes.firstIndex(of: UInt8(ascii: ":")),
              bytes[schemeEnd...].starts(with: Array("://".utf8)) else { throw .invalidTargetURI(text) }
        // Anything but http and https is refused below, by URLOrigin.
        let scheme = bytes[..<schemeEnd]
        let authorityStart = schemeEnd + 3
        let authorityEnd = bytes[authorityStart...].firstIndex {
            $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#")
        } ?? bytes.endIndex
        var authority = bytes[authorityStart..<authorityEnd]
        // Credentials in the URL are not part of the target.
        if let at = authority.lastIndex(of: UInt8(ascii: "@")) { authority = authority[(at + 1)...] }
        // The port separator is the last colon after any IPv6 literal's closing bracket.
        let hostEnd: Int
        if let colon = authority.lastIndex(of: UInt8(ascii: ":")),
           authority.lastIndex(of: UInt8(ascii: "]")).map({ $0 < colon }) ?? true {
            hostEnd = colon
        } else {
            hostEnd = authority.endIndex
        }
        let host = authority[authority.startIndex..<hostEnd]
        let portText = hostEnd < authority.endIndex ? String(decoding: authority[(hostEnd + 1)...], as: UTF8.self) : ""
        // Digits only: `UInt16("+443")` would accept a sign. A port with leading zeros ("0443")
        // names the same port, which URLOrigin then writes canonically.
        guard portText.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }),
              portText.isEmpty || UInt16(portText) != nil,
              let origin = URLOrigin(scheme: String(decoding: scheme, as: UTF8.self),
                                     host: String(decoding: host, as: UTF8.self), port: UInt16(portText).map(Int.init))
        else {
            throw .invalidTargetURI(text)
        }
        let pathEnd = bytes[authorityEnd...].firstIndex { $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") }
            ?? bytes.endIndex
        let path = bytes[authorityEnd..<pathEnd]
        self.origin = origin.string
        string = self.origin + (path.isEmpty ? "/" : String(decoding: path, as: UTF8.self))
    }
}
