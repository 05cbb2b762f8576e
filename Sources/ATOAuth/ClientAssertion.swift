import DPoP
import Foundation

/// A `private_key_jwt` client assertion (RFC 7523 §2.2, RFC 7521): how a confidential client
/// proves its identity to the PAR, token and revocation endpoints.
///
/// ES256, `kid` of the session's key, `iss` = `sub` = the client_id, `aud` = the issuer, a
/// unique `jti`, `iat` now and a short `exp` (servers refuse assertions older than 60 s).
public enum ClientAssertion {
    /// The `client_assertion_type` sent with it.
    public static let type = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
    /// How long an assertion stays valid.
    public static let lifetime: TimeInterval = 60

    /// A fresh assertion for `clientID` addressed to `issuer`.
    public static func make(key: ClientSigningKey, clientID: String, issuer: String, now: Date = Date())
        throws(ClientAssertionError) -> String
    {
        let issuedAt = Int(now.timeIntervalSince1970)
        let header = try json(Header(alg: "ES256", kid: key.keyID, typ: "JWT"))
        let claims = try json(Claims(iss: clientID, sub: clientID, aud: issuer, jti: SecureRandom.state(),
                                     iat: issuedAt, exp: issuedAt + Int(lifetime)))
        do {
            return try ES256.sign(headerJSON: header, payloadJSON: claims, key: key.privateKey)
        } catch {
            throw .signingFailed(String(describing: error))
        }
    }

    private static func json(_ value: some Encodable) throws(ClientAssertionError) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        do {
            return String(decoding: try encoder.encode(value), as: UTF8.self)
        } catch {
            throw .signingFailed(String(describing: error))
        }
    }

    private struct Header: Encodable {
        var alg: String
        var kid: String
        var typ: String
    }

    private struct Claims: Encodable {
        var iss: String
        var sub: String
        var aud: String
        var jti: String
        var iat: Int
        var exp: Int
    }
}

public enum ClientAssertionError: Error, Sendable, Equatable, CustomStringConvertible {
    case signingFailed(String)

    public var description: String {
        switch self {
        case .signingFailed(let reason): "cannot sign the client assertion: \(reason)"
        }
    }
}

/// How the client authenticates at the authorization server's endpoints.
public enum ClientAuthentication: Sendable {
    /// A public client (loopback, native app, or hosted with `token_endpoint_auth_method: none`):
    /// `client_id` only.
    case none(clientID: String)
    /// A confidential client: `client_id` plus a fresh `private_key_jwt` assertion each time.
    case privateKeyJWT(clientID: String, key: ClientSigningKey)

    public var clientID: String {
        switch self {
        case .none(let clientID), .privateKeyJWT(let clientID, _): clientID
        }
    }

    /// Adds `client_id` and, for confidential clients, `client_assertion_type` and
    /// `client_assertion` (addressed to `issuer`) to `form`.
    public func authenticate(_ form: inout FormBody, issuer: String, now: Date = Date()) throws(ClientAssertionError) {
        form.append("client_id", clientID)
        if case .privateKeyJWT(let clientID, let key) = self {
            form.append("client_assertion_type", ClientAssertion.type)
            form.append("client_assertion", try ClientAssertion.make(key: key, clientID: clientID, issuer: issuer, now: now))
        }
    }
}
