import DPoP
import Foundation
import JSONRPC

/// Hosted clients: an https `client_id` whose metadata document the testbed serves at
/// `https://clients.<domain>/…`, checked as the reference server checks a fetched document.
extension OAuthClientRules {
    static func hosted(_ clientID: String, directory: OAuthClientDirectory, clientsOrigin: String)
        throws(OAuthFailure) -> OAuthClientRules
    {
        guard clientID.hasPrefix(clientsOrigin + "/") else {
            throw .invalidClient("Client metadata can only be fetched from \(clientsOrigin) on this testbed")
        }
        let path = String(clientID.dropFirst(clientsOrigin.count))
        guard let bytes = directory.document(path: path) else {
            throw .invalidClient("Unable to obtain client metadata for \(clientID)")
        }
        guard let document = (try? JSONValue.parse(bytes))?.objectValue else {
            throw .invalidClient("Client metadata for \(clientID) is not a JSON object")
        }
        func strings(_ name: String) -> [String] { document[name]?.arrayValue?.compactMap(\.stringValue) ?? [] }

        guard document["client_id"]?.stringValue == clientID else {
            throw .invalidClient("client_id in the metadata does not match the URL it was fetched from")
        }
        let grantTypes = strings("grant_types")
        guard grantTypes.contains("authorization_code"), grantTypes.contains("refresh_token") else {
            throw .invalidClient("grant_types must include authorization_code and refresh_token")
        }
        guard strings("response_types").contains("code") else { throw .invalidClient("response_types must include code") }
        guard let scope = document["scope"]?.stringValue, scope.split(separator: " ").contains("atproto") else {
            throw .invalidClient("scope must include atproto")
        }
        guard document["dpop_bound_access_tokens"]?.boolValue == true else {
            throw .invalidClient("dpop_bound_access_tokens must be true")
        }
        let redirectURIs = strings("redirect_uris")
        guard !redirectURIs.isEmpty else { throw .invalidClient("At least one redirect_uri is required") }
        let native = document["application_type"]?.stringValue == "native"
        for uri in redirectURIs {
            guard let url = URLComponents(string: uri), let scheme = url.scheme, url.fragment == nil else {
                throw .invalidClient("Invalid redirect_uri \(uri)")
            }
            // Web clients redirect over https only; native apps may use loopback or custom schemes.
            guard scheme == "https" || (native && (isLoopbackRedirect(uri) || scheme.contains("."))) else {
                throw .invalidClient("redirect_uri \(uri) is not allowed for a \(native ? "native" : "web") client")
            }
        }
        let keys: [String: PublicJWK]
        switch document["token_endpoint_auth_method"]?.stringValue ?? "none" {
        case "none":
            keys = [:]
        case "private_key_jwt":
            guard !native else { throw .invalidClient("Native clients cannot use private_key_jwt") }
            if let alg = document["token_endpoint_auth_signing_alg"]?.stringValue, alg != "ES256" {
                throw .invalidClient("token_endpoint_auth_signing_alg must be ES256")
            }
            keys = try signingKeys(document, directory: directory, clientsOrigin: clientsOrigin)
        case let other:
            throw .invalidClient("Unsupported token_endpoint_auth_method \(other)")
        }
        return OAuthClientRules(clientID: clientID, redirectURIs: redirectURIs, scope: scope, isLoopback: false,
                                signingKeys: keys)
    }

    /// The EC P-256 keys with a `kid`, inline (`jwks`) or at a `jwks_uri` the testbed serves.
    private static func signingKeys(_ document: [String: JSONValue], directory: OAuthClientDirectory,
                                    clientsOrigin: String) throws(OAuthFailure) -> [String: PublicJWK]
    {
        var set = document["jwks"]
        if set == nil, let uri = document["jwks_uri"]?.stringValue {
            guard uri.hasPrefix(clientsOrigin + "/"),
                let bytes = directory.document(path: String(uri.dropFirst(clientsOrigin.count)))
            else { throw .invalidClient("Unable to obtain the client's jwks from \(uri)") }
            set = try? JSONValue.parse(bytes)
        }
        var keys: [String: PublicJWK] = [:]
        for entry in set?["keys"]?.arrayValue ?? [] {
            let members = PublicJWK.Members(
                kty: entry["kty"]?.stringValue, crv: entry["crv"]?.stringValue, x: entry["x"]?.stringValue,
                y: entry["y"]?.stringValue, d: entry["d"]?.stringValue)
            guard let kid = entry["kid"]?.stringValue, let jwk = PublicJWK(members) else { continue }
            keys[kid] = jwk
        }
        guard !keys.isEmpty else { throw .invalidClient("A private_key_jwt client needs at least one ES256 key with a kid") }
        return keys
    }
}
