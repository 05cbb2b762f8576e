import Crypto
import Foundation
import WebBasics

/// The grants of a plain OAuth 2.0 server (RFC 6749 with PKCE, RFC 7009), as the testbed's
/// Mastodon-compatible instance and its generic OAuth 2.0 server keep them: single-use codes
/// bound to a client, redirect and S256 challenge; access tokens with an expiry; refresh tokens
/// used once each, a replay told apart from a stranger; revocation ending a whole grant.
struct OAuth2GrantBook: Sendable {
    /// One authorization: every token issued from it (and refreshed from them) shares its id.
    struct Grant: Sendable, Hashable {
        var id: String
        var clientID: String
        /// The user it was approved for.
        var subject: String
        var scope: String
    }

    struct IssuedCode: Sendable {
        var grant: Grant
        var redirectURI: String
        var challenge: String
        var expiresAt: Date
    }

    struct AccessToken: Sendable {
        var grant: Grant
        var expiresAt: Date
    }

    /// Why an access token is refused.
    enum AccessRefusal: Error {
        case unknown, expired
    }

    private(set) var codes: [String: IssuedCode] = [:]
    private(set) var accessTokens: [String: AccessToken] = [:]
    /// Live refresh tokens; each is used once (its successor replaces it).
    private(set) var refreshTokens: [String: Grant] = [:]
    /// Refresh tokens already used, kept to tell a replay from a stranger.
    private var spentRefreshTokens: Set<String> = []
    /// Spent refresh tokens presented again at least once.
    private var replayedRefreshTokens: Set<String> = []
    private(set) var stats = OAuth2Stats()

    static let invalidGrant = OAuthFailure.invalidGrant(
        "The provided authorization grant is invalid, expired, revoked, does not match the redirection URI used in the authorization request, or was issued to another client.")

    /// A code for `grant`, valid ten minutes.
    mutating func issueCode(for grant: Grant, redirectURI: String, challenge: String, now: Date) -> String {
        let code = Encodings.randomToken(bytes: 24)
        codes[code] = IssuedCode(grant: grant, redirectURI: redirectURI, challenge: challenge, expiresAt: now.addingTimeInterval(600))
        stats.authorizations += 1
        return code
    }

    /// The grant of `code`, which is used up whatever the outcome.
    mutating func redeem(code: String, clientID: String, redirectURI: String?, verifier: String?, now: Date) throws(OAuthFailure) -> Grant {
        guard let issued = codes.removeValue(forKey: code), issued.grant.clientID == clientID, issued.expiresAt > now,
              issued.redirectURI == redirectURI else { throw Self.invalidGrant }
        guard Base64URL.encode(SHA256.hash(data: Array((verifier ?? "").utf8))) == issued.challenge else {
            throw .invalidGrant("The code verifier does not match the code challenge")
        }
        stats.codeExchanges += 1
        return issued.grant
    }

    /// The grant of `refreshToken`, which is spent: a second use is a replay.
    mutating func spend(refreshToken: String, clientID: String) throws(OAuthFailure) -> Grant {
        guard let grant = refreshTokens[refreshToken], grant.clientID == clientID else {
            if spentRefreshTokens.contains(refreshToken) {
                stats.refreshTokenReplays += 1
                if replayedRefreshTokens.insert(refreshToken).inserted { stats.refreshTokensReplayed += 1 }
            }
            throw Self.invalidGrant
        }
        refreshTokens[refreshToken] = nil
        spentRefreshTokens.insert(refreshToken)
        stats.refreshes += 1
        return grant
    }

    /// The grant a token request's `grant_type` presents: a code (with its `code_verifier`) or a
    /// refresh token, each used up.
    mutating func grant(for fields: [String: String], clientID: String, now: Date) throws(OAuthFailure) -> Grant {
        switch fields["grant_type"] {
        case "authorization_code":
            try redeem(code: fields["code"] ?? "", clientID: clientID, redirectURI: fields["redirect_uri"],
                       verifier: fields["code_verifier"], now: now)
        case "refresh_token":
            try spend(refreshToken: fields["refresh_token"] ?? "", clientID: clientID)
        default:
            throw OAuthFailure(.badRequest, "unsupported_grant_type", "The authorization grant type is not supported by the authorization server.")
        }
    }

    /// Records `access` (made by the caller: random, or a JWT) for `grant`, and a new refresh
    /// token unless `withRefresh` is false.
    mutating func issue(access: String, for grant: Grant, expiresAt: Date, withRefresh: Bool) -> String? {
        accessTokens[access] = AccessToken(grant: grant, expiresAt: expiresAt)
        guard withRefresh else { return nil }
        let refresh = Encodings.randomToken(bytes: 32)
        refreshTokens[refresh] = grant
        return refresh
    }

    /// Ends every grant.
    mutating func revokeAll() {
        accessTokens = [:]
        refreshTokens = [:]
    }

    /// Ends the whole grant `token` belongs to (RFC 7009); false for a token it does not know.
    @discardableResult
    mutating func revoke(_ token: String) -> Bool {
        guard let grantID = accessTokens[token]?.grant.id ?? refreshTokens[token]?.id else { return false }
        accessTokens = accessTokens.filter { $0.value.grant.id != grantID }
        refreshTokens = refreshTokens.filter { $0.value.id != grantID }
        stats.revocations += 1
        return true
    }

    /// The grant an access token stands for, now.
    mutating func authenticate(_ token: String, now: Date) -> Result<Grant, AccessRefusal> {
        guard let access = accessTokens[token] else {
            stats.rejectedCalls += 1
            return .failure(.unknown)
        }
        guard access.expiresAt > now else {
            stats.rejectedCalls += 1
            return .failure(.expired)
        }
        stats.authenticatedCalls += 1
        return .success(access.grant)
    }

    /// Grants with a live refresh token.
    var liveGrants: Int { Set(refreshTokens.values.map(\.id)).count }
}

/// What an OAuth 2.0 server of the testbed saw, for tests.
public struct OAuth2Stats: Sendable, Equatable {
    public var clientsRegistered = 0
    public var authorizations = 0
    public var codeExchanges = 0
    public var refreshes = 0
    /// Presentations of a spent refresh token.
    public var refreshTokenReplays = 0
    /// Distinct spent refresh tokens presented again: a client that replays one token twice
    /// (it crashed before recording the first replay's refusal) counts once here.
    public var refreshTokensReplayed = 0
    public var revocations = 0
    public var authenticatedCalls = 0
    public var rejectedCalls = 0
}
