/// The names in XRPC error bodies that only the gateway sends (those of failed calls are the
/// JSON-RPC catalogue's, `DaemonErrorName`). Stable: clients match on them.
public enum GatewayErrorName: String, Sendable, CaseIterable {
    /// A request from a web page (Origin, Referer) or naming a foreign Host: 403.
    case browserRequestRefused = "BrowserRequestRefused"
    /// A path that is not `/xrpc/<nsid>`: 404.
    case notFound = "NotFound"
    /// A method other than GET, HEAD or POST, or an event stream (subscription): 405 / 501.
    case methodNotSupported = "MethodNotSupported"
    /// A local gateway token (`bskyctl exec`'s) that was revoked, or never issued: 401.
    case gatewayTokenInvalid = "GatewayTokenInvalid"
}
