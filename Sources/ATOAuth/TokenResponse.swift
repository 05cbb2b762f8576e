import ATSyntax
import Foundation
import JSONRPC

/// A validated answer of the token endpoint: what a session stores.
public struct OAuthTokenSet: Sendable, Equatable {
    public var accessToken: String
    public var refreshToken: String
    /// The account the tokens are for (`sub`).
    public var did: DID
    /// The scope the server actually granted: it may be less than asked.
    public var scope: String
    public var expiresAt: Date

    public init(accessToken: String, refreshToken: String, did: DID, scope: String, expiresAt: Date) {
        self.accessToken = accessToken
        self.refreshToken = refreshToken
        self.did = did
        self.scope = scope
        self.expiresAt = expiresAt
    }

    /// Checks a token endpoint response body (code exchange or refresh).
    ///
    /// - `token_type` is DPoP (compared case-insensitively, as RFC 6749 §7.1 says);
    /// - `scope` is present and contains `atproto`;
    /// - `sub` is a DID, and equals `expectedDID` when the account is known (refresh, re-login);
    /// - `expires_in` is a positive integer;
    /// - `access_token` and `refresh_token` are non-empty strings.
    ///
    /// It does not check that `sub`'s PDS names this issuer: that needs identity resolution,
    /// and the caller must do it before trusting the tokens.
    public init(responseBody body: some Collection<UInt8>, expectedDID: String?, receivedAt: Date)
        throws(TokenResponseError)
    {
        guard let value = try? JSONValue.parse(body), let object = value.objectValue else { throw .notJSON }
        guard let accessToken = object["access_token"]?.stringValue, !accessToken.isEmpty else { throw .missingAccessToken }
        guard let tokenType = object["token_type"]?.stringValue else { throw .wrongTokenType(nil) }
        guard tokenType.lowercased() == "dpop" else { throw .wrongTokenType(tokenType) }
        guard let scope = object["scope"]?.stringValue else { throw .missingScope }
        guard OAuthScope.contains(scope, "atproto") else { throw .scopeLacksAtproto(scope) }
        guard let subject = object["sub"]?.stringValue else { throw .missingSubject }
        guard let did = DID(subject) else { throw .invalidSubject(subject) }
        if let expectedDID, expectedDID != subject { throw .subjectMismatch(expected: expectedDID, actual: subject) }
        guard let expiresIn = object["expires_in"]?.intValue, expiresIn > 0 else { throw .invalidExpiry }
        guard let refreshToken = object["refresh_token"]?.stringValue, !refreshToken.isEmpty else {
            throw .missingRefreshToken
        }
        self.init(accessToken: accessToken, refreshToken: refreshToken, did: did, scope: scope,
                  expiresAt: receivedAt.addingTimeInterval(TimeInterval(expiresIn)))
    }
}

extension OAuthTokenSet: CustomStringConvertible, CustomDebugStringConvertible {
    public var description: String { "OAuthTokenSet(did: \(did), scope: \(scope), tokens redacted)" }
    public var debugDescription: String { description }
}

/// Why a token response was refused, one rule each.
public enum TokenResponseError: Error, Sendable, Equatable, CustomStringConvertible {
    case notJSON
    case missingAccessToken
    case wrongTokenType(String?)
    case missingScope
    case scopeLacksAtproto(String)
    case missingSubject
    case invalidSubject(String)
    case subjectMismatch(expected: String, actual: String)
    case invalidExpiry
    case missingRefreshToken

    public var description: String {
        switch self {
        case .notJSON: "the token response is not a JSON object"
        case .missingAccessToken: "the token response has no access_token"
        case .wrongTokenType(let type): "the token type is \(type ?? "missing"), not DPoP"
        case .missingScope: "the token response has no scope"
        case .scopeLacksAtproto(let scope): "the granted scope \"\(scope)\" lacks atproto"
        case .missingSubject: "the token response has no sub"
        case .invalidSubject(let subject): "the token response's sub \"\(subject)\" is not a DID"
        case .subjectMismatch(let expected, let actual): "the tokens are for \(actual), not \(expected)"
        case .invalidExpiry: "the token response's expires_in is not a positive integer"
        case .missingRefreshToken: "the token response has no refresh_token"
        }
    }
}
