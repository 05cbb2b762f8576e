import NIOHTTP1
import XRPCGateway

/// Who a gateway request comes from, beyond its uid: the local token it carries (from
/// `bskyctl exec`, or the token file), and so the policy it is held to.
///
/// A token travels as `Authorization: Bearer bskyd-gw-…` or as the start of the base URL's
/// path, `/t/<token>/xrpc/…`, so that a program whose SDK only lets it set a base URL can carry
/// one. Any other `Authorization` is the program's own and is ignored.
struct GatewayCaller {
    /// The token carried, if any.
    var token: Substring?
    /// The request target without the token's path prefix.
    var uri: String

    init(_ head: HTTPRequestHead) {
        self.init(uri: head.uri, headers: head.headers)
    }

    init(uri: String, headers: HTTPHeaders) {
        var uri = uri
        var token: Substring?
        if uri.hasPrefix("/t/") {
            let rest = uri.dropFirst(3)
            let end = rest.firstIndex(of: "/") ?? rest.endIndex
            token = rest[..<end]
            uri = String(rest[end...])
        }
        if token == nil, let authorization = headers.first(name: "authorization") {
            let parts = authorization.split(separator: " ", maxSplits: 1)
            if parts.count == 2, parts[0].lowercased() == "bearer", parts[1].hasPrefix(GatewayTokens.prefix) {
                token = parts[1]
            }
        }
        self.token = token
        self.uri = uri
    }
}
