import BlueskyHTTP
import Foundation
import JSONRPC

/// Finds an OAuth 2.0 server's metadata from its issuer URL: RFC 8414's
/// `/.well-known/oauth-authorization-server` (inserted before the issuer's path), then OpenID
/// Connect's `/.well-known/openid-configuration` when the first is not there.
public struct ProviderDiscovery: Sendable {
    let http: any HTTPFetching
    let timeout: Duration
    let allowInsecureLoopback: Bool

    public init(http: any HTTPFetching, timeout: Duration, allowInsecureLoopback: Bool = false) {
        self.http = http
        self.timeout = timeout
        self.allowInsecureLoopback = allowInsecureLoopback
    }

    public func discover(issuer: String) async throws(OAuth2ClientError) -> ProviderMetadata {
        let base = try ProviderMetadata.checkedURL(issuer, allowInsecureLoopback: allowInsecureLoopback)
        for url in Self.metadataURLs(of: base) {
            let request = OutboundRequest(url: url, headers: [("Accept", "application/json")])
            // Not published at this path: the next may have it.
            guard let response = try await OAuth2Exchange.send(request, http: http, timeout: timeout, notFoundIsNil: true) else { continue }
            let document = try OAuth2Exchange.object(response, what: "the metadata at \(url.absoluteString)")
            return try ProviderMetadata(document: document, expectedIssuer: issuer, allowInsecureLoopback: allowInsecureLoopback)
        }
        throw .invalidAnswer("\(issuer) publishes no OAuth metadata (RFC 8414 or OpenID discovery): describe it in a [[provider]]")
    }

    /// RFC 8414 §3.1: the well-known segment goes between the host and the issuer's path; OpenID
    /// discovery appends its segment to the issuer.
    static func metadataURLs(of issuer: URL) -> [URL] {
        var path = issuer.path
        if path.hasSuffix("/") { path.removeLast() }
        var origin = URLComponents()
        origin.scheme = issuer.scheme
        origin.host = issuer.host
        origin.port = issuer.port
        func url(_ path: String) -> URL? {
            var components = origin
            components.path = path
            return components.url
        }
        return [url("/.well-known/oauth-authorization-server" + path), url(path + "/.well-known/openid-configuration")].compactMap { $0 }
    }
}
