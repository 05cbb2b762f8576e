import ATOAuth
import Foundation
import JSONRPC

/// `oauth.clientMetadata` and `oauth.rotateClientKey`: the OAuth client blueskyd presents, and
/// what to publish for it (docs/PROTOCOL.md).
extension DaemonMethods {
    func client(_ method: String, _ params: Params) async throws(DaemonError) -> JSONValue {
        let client = accounts.environment.oauth.client
        switch method {
        case "oauth.clientMetadata":
            try params.allowOnly([])
            return .object(try await clientMetadataReply(client))
        case "oauth.rotateClientKey":
            try params.allowOnly([])
            // Logins abandoned long ago give their key back first.
            accounts.pruneFinishedLogins()
            let (added, removed) = try await client.rotateKey(store: accounts.store, now: accounts.environment.now())
            logger.notice("rotated the OAuth client's signing key; publish the client metadata again", metadata: [
                "kid": "\(added)", "removed": "\(removed.joined(separator: ","))",
            ])
            var reply = try await clientMetadataReply(client)
            reply["addedKeyID"] = .string(added)
            reply["removedKeyIDs"] = .array(removed.map(JSONValue.string))
            return .object(reply)
        default:
            throw .methodNotFound(method)
        }
    }

    /// The client's kind, id and redirect, the document to publish at the client_id URL (null
    /// for the loopback client), and a confidential client's JWKS and keys.
    private func clientMetadataReply(_ client: OAuthClientIdentity) async throws(DaemonError) -> [String: JSONValue] {
        let settings = client.settings
        let document: ClientMetadataDocument?
        do {
            document = try client.metadataDocument()
        } catch {
            throw .internalError("cannot build the client metadata: \(error.description)")
        }
        var reply: [String: JSONValue] = [
            "kind": .string(settings.kind.rawValue),
            "clientID": .string(settings.clientID ?? "http://localhost"),
            "redirectURI": settings.redirectURI.map(JSONValue.string) ?? .string("http://127.0.0.1:<port>/callback"),
            "redirectDelivery": .string(settings.receivesRedirect ? "loopback" : "paste"),
            "scope": .string(settings.scope),
            "document": .null,
            "jwks": .null,
        ]
        if let document {
            reply["document"] = (try? JSONValue(encoding: document)) ?? .null
        }
        if settings.authentication == .privateKeyJWT {
            let inUse = (try? await accounts.store.clientKeyIDsInUse()) ?? []
            let keys = client.signingKeys
            reply["jwks"] = (try? JSONValue(encoding: JWKSet(keys: keys.map(\.jwk)))) ?? .null
            reply["keys"] = .array(keys.enumerated().map { index, key in
                ["kid": .string(key.keyID), "inUse": .bool(inUse.contains(key.keyID)),
                 "signsNewLogins": .bool(index == keys.count - 1)]
            })
        }
        return reply
    }
}

