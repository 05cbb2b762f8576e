import Crypto
import WebBasics

/// What a proof is for: the method and target of one HTTP request, and which kind of server
/// receives it.
///
/// The two kinds are separate constructors so that `ath` (the access-token hash) can only be
/// attached to a resource (PDS) request: the authorization server must never receive one, and
/// there is no way to spell that mistake with this type.
public struct DPoPRequest: Sendable, Hashable {
    /// The HTTP method, uppercase (`htm`).
    public let method: String
    /// The normalised target (`htu`), whose origin keys the nonce cache.
    public let target: HTTPTargetURI
    /// base64url(SHA-256(access token)), only for resource requests.
    public let accessTokenHash: String?

    /// A request to the authorization server (PAR, token, refresh, revocation): no `ath`.
    public static func authorizationServer(method: String, url: String) throws(DPoPError) -> DPoPRequest {
        DPoPRequest(method: try validated(method), target: try HTTPTargetURI(url), accessTokenHash: nil)
    }

    /// A request to a resource server (the PDS) presenting `accessToken`: carries `ath`.
    public static func resource(method: String, url: String, accessToken: String) throws(DPoPError) -> DPoPRequest {
        DPoPRequest(method: try validated(method), target: try HTTPTargetURI(url),
                    accessTokenHash: accessTokenHash(accessToken))
    }

    /// `ath` for `accessToken`: base64url of the SHA-256 of its ASCII bytes (RFC 9449 §4.2).
    public static func accessTokenHash(_ accessToken: String) -> String {
        Base64URL.encode(SHA256.hash(data: Array(accessToken.utf8)))
    }

    /// The server-side view: what a verifier expects for a request it received.
    public var isResourceRequest: Bool { accessTokenHash != nil }

    private init(method: String, target: HTTPTargetURI, accessTokenHash: String?) {
        self.method = method
        self.target = target
        self.accessTokenHash = accessTokenHash
    }

    // `htm` is compared exactly by servers, and methods are case-sensitive tokens (RFC 9110 §9.1):
    // "post" is not POST, so refuse it instead of silently uppercasing someone's bug.
    private static func validated(_ method: String) throws(DPoPError) -> String {
        guard !method.isEmpty, method.utf8.allSatisfy({ $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z") }) else {
            throw .invalidMethod(method)
        }
        return method
    }
}
