import BlueskyHTTP
import Foundation
import JSONRPC

/// A PDS's `/.well-known/oauth-protected-resource` document (RFC 9728), the parts atproto uses.
public struct ProtectedResourceMetadata: Sendable, Equatable {
    /// The resource identifier: must be the PDS origin.
    public var resource: String?
    /// The authorization servers: atproto requires exactly one.
    public var authorizationServers: [String]
    public var scopesSupported: [String]?

    public init(resource: String?, authorizationServers: [String], scopesSupported: [String]? = nil) {
        self.resource = resource
        self.authorizationServers = authorizationServers
        self.scopesSupported = scopesSupported
    }

    /// Where to fetch it for the PDS at `pdsOrigin`.
    public static func url(pdsOrigin: String) -> URL? {
        URL(string: pdsOrigin + "/.well-known/oauth-protected-resource")
    }

    /// Reads the document from a response: HTTP 200 with a JSON object.
    public init(response: InboundResponse, url: String) throws(OAuthMetadataError) {
        let object = try MetadataJSON.object(response: response, url: url)
        let fields = MetadataJSON.Reader(object: object, url: url)
        resource = try fields.string("resource")
        authorizationServers = try fields.strings("authorization_servers") ?? []
        scopesSupported = try fields.strings("scopes_supported")
    }

    /// Checks the document against the PDS it came from and returns the issuer to use.
    ///
    /// - `resource` equals the PDS origin, and there is exactly one authorization server whose
    ///   URL is an https origin (http to loopback only when `policy` allows it).
    public func validatedIssuer(pdsOrigin: String, policy: OAuthURLPolicy = .init()) throws(OAuthMetadataError) -> String {
        guard resource == pdsOrigin else { throw .resourceMismatch(expected: pdsOrigin, actual: resource) }
        guard authorizationServers.count == 1, let issuer = authorizationServers.first else {
            throw .authorizationServerCount(authorizationServers.count)
        }
        try policy.checkOrigin(issuer, role: .authorizationServer)
        return issuer
    }
}

/// Reading metadata JSON with the project's parser, each wrong type a clear failure.
enum MetadataJSON {
    static func object(response: InboundResponse, url: String) throws(OAuthMetadataError) -> [String: JSONValue] {
        guard response.status == 200 else { throw .unexpectedStatus(url: url, status: response.status) }
        guard let value = try? JSONValue.parse(response.body) else { throw .notJSON(url: url) }
        guard let object = value.objectValue else { throw .malformed(url: url, reason: "not a JSON object") }
        return object
    }

    struct Reader {
        let object: [String: JSONValue]
        let url: String

        func string(_ name: String) throws(OAuthMetadataError) -> String? {
            guard let value = object[name], !value.isNull else { return nil }
            guard let text = value.stringValue else { throw .malformed(url: url, reason: "\(name) is not a string") }
            return text
        }

        func bool(_ name: String) throws(OAuthMetadataError) -> Bool? {
            guard let value = object[name], !value.isNull else { return nil }
            guard let flag = value.boolValue else { throw .malformed(url: url, reason: "\(name) is not a boolean") }
            return flag
        }

        func strings(_ name: String) throws(OAuthMetadataError) -> [String]? {
            guard let value = object[name], !value.isNull else { return nil }
            guard let array = value.arrayValue else { throw .malformed(url: url, reason: "\(name) is not an array") }
            var result: [String] = []
            for element in array {
                guard let text = element.stringValue else {
                    throw .malformed(url: url, reason: "\(name) has an element that is not a string")
                }
                result.append(text)
            }
            return result
        }
    }
}
