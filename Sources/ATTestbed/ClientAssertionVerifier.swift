import DPoP
import Foundation
import JSONRPC

/// Checks `private_key_jwt` client assertions (RFC 7523) as the reference server does: ES256
/// signed by a key of the client's JWKS (by `kid`), `iss` and `sub` the client_id, `aud` the
/// issuer, a `jti` used once, and at most 60 seconds old.
struct ClientAssertionVerifier: Sendable {
    static let assertionType = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
    static let maximumAge: TimeInterval = 60
    /// Clock difference tolerated for `iat` in the future.
    static let tolerance: TimeInterval = 10

    let replayCache = DPoPReplayCache()
    let now: @Sendable () -> Date

    /// Authenticates the request's client. Returns the assertion's `kid` for a confidential
    /// client (the session stays bound to it), nil for a public one.
    func authenticate(_ form: [String: String], client: OAuthClientRules, issuer: String) throws(OAuthFailure) -> String? {
        let assertion = form["client_assertion"]
        guard client.isConfidential else {
            guard assertion == nil, form["client_assertion_type"] == nil else {
                throw .invalidClient("Client authentication method mismatch (this client is public)")
            }
            return nil
        }
        guard form["client_assertion_type"] == Self.assertionType else {
            throw .invalidClient("client_assertion_type must be \(Self.assertionType)")
        }
        guard let assertion, let jws = CompactJWS(assertion),
            let header = try? JSONValue.parse(jws.headerJSON), let claims = try? JSONValue.parse(jws.payloadJSON)
        else { throw .invalidClient("Invalid client_assertion") }
        guard header["alg"]?.stringValue == "ES256" else { throw .invalidClient("client_assertion must be signed with ES256") }
        guard let kid = header["kid"]?.stringValue, let jwk = client.signingKeys[kid], let key = try? jwk.publicKey() else {
            throw .invalidClient("client_assertion is signed with a key the client does not publish")
        }
        guard jws.isSignedBy(key) else { throw .invalidClient("client_assertion signature verification failed") }
        guard claims["iss"]?.stringValue == client.clientID, claims["sub"]?.stringValue == client.clientID else {
            throw .invalidClient("client_assertion iss and sub must be the client_id")
        }
        let audience = claims["aud"]?.stringValue.map { [$0] } ?? claims["aud"]?.arrayValue?.compactMap(\.stringValue) ?? []
        guard audience.contains(issuer) else { throw .invalidClient("client_assertion aud must be the issuer") }
        guard let jti = claims["jti"]?.stringValue, !jti.isEmpty else { throw .invalidClient("client_assertion needs a jti") }
        guard let issuedAt = claims["iat"]?.doubleValue else { throw .invalidClient("client_assertion needs an iat") }
        let current = now()
        let age = current.timeIntervalSince1970 - issuedAt
        guard age <= Self.maximumAge else { throw .invalidClient("client_assertion is too old") }
        guard age >= -Self.tolerance else { throw .invalidClient("client_assertion is issued in the future") }
        if let expiry = claims["exp"]?.doubleValue, expiry <= current.timeIntervalSince1970 {
            throw .invalidClient("client_assertion has expired")
        }
        let remembered = Date(timeIntervalSince1970: issuedAt + Self.maximumAge + Self.tolerance)
        guard replayCache.insertIfUnseen(jti, expiry: remembered, now: current) else {
            throw .invalidClient("client_assertion jti was already used")
        }
        return kid
    }
}
