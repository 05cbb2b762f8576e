import Foundation

/// One OAuth session to create without a browser login: a new account and the DPoP key its
/// tokens are bound to.
public struct OAuthSessionMintRequest: Sendable, Codable, Equatable {
    /// The new account's handle is `<name>.<domain>`; its DID is a fresh did:plc whose document
    /// the testbed's PLC serves, like any account's.
    public var name: String
    /// The RFC 7638 thumbprint of the client's DPoP key (`DPoPKey.thumbprint`): the session is
    /// bound to it, so refreshes and PDS calls must be signed with that key.
    public var thumbprint: String
    /// When the first access token expires (whole seconds: a token's `exp` is an integer, so a
    /// fraction is dropped). It may be far from the configured lifetime, or even past.
    public var accessExpiresAt: Date

    public init(name: String, thumbprint: String, accessExpiresAt: Date) {
        self.name = name
        self.thumbprint = thumbprint
        self.accessExpiresAt = accessExpiresAt
    }
}

/// A minted session: what a client would hold after the code exchange. The tokens are secrets
/// like any others: never print them.
public struct MintedOAuthSession: Sendable, Codable, Equatable {
    public var did: String
    public var handle: String
    public var accessToken: String
    public var refreshToken: String
    /// The access token's `exp`.
    public var accessExpiresAt: Date
    /// When the session began (its fixed end is counted from here, as after a login).
    public var sessionStartedAt: Date
}

/// Why sessions could not be minted; nothing is created then.
public enum OAuthMintError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The client_id is one the authorization server would refuse.
    case invalidClient(String)
    /// A confidential client's sessions are bound to its assertion key, which minting cannot prove.
    case confidentialClient(String)
    case scopeNotAllowed(String)
    /// The handle is reserved, taken, or asked for twice.
    case nameUnavailable(String)

    public var description: String {
        switch self {
        case .invalidClient(let reason): "the client_id is refused: \(reason)"
        case .confidentialClient(let clientID): "\(clientID) is a confidential client; only public clients' sessions can be minted"
        case .scopeNotAllowed(let scope): "the scope \"\(scope)\" is not allowed for this client"
        case .nameUnavailable(let name): "the account name \(name) is reserved or already taken"
        }
    }
}

extension Testbed {
    /// Registers OAuth sessions at the PDS's authorization server as the code exchange would
    /// (session id, DID, client_id, the DPoP key thumbprint, scope, the public client's session
    /// lifetime), each for a new account, and returns each session's access token (expiring when
    /// the request says) and single-use refresh token. Refreshing them then works exactly like
    /// refreshing a logged-in session. For benchmarks that need thousands of sessions: no PAR,
    /// no browser, no per-session round trips.
    public func mintOAuthSessions(_ requests: [OAuthSessionMintRequest], clientID: String, scope: String)
        throws(OAuthMintError) -> [MintedOAuthSession]
    {
        let rules: OAuthClientRules
        do {
            rules = try OAuthClientRules.resolve(
                clientID, directory: context.oauth.clients, clientsOrigin: context.url(host: context.oauth.clientsHost))
        } catch {
            throw .invalidClient(error.description)
        }
        guard !rules.isConfidential else { throw .confidentialClient(clientID) }
        guard rules.allowsScope(scope) else { throw .scopeNotAllowed(scope) }
        try checkNamesAvailable(requests.map(\.name))

        let now = context.clock.now()
        let server = context.oauth.issuer
        let lifetime = context.configuration.oauthSessionLifetime.seconds
        var minted: [MintedOAuthSession] = []
        var grants: [MintedGrant] = []
        minted.reserveCapacity(requests.count)
        grants.reserveCapacity(requests.count)
        for request in requests {
            let name = request.name.lowercased()
            let account = AccountState(did: Identifiers.randomPLC(), handle: context.handle(forName: name),
                                       spec: AccountSpec(name: name))
            context.accounts.add(account)
            let session = OAuthSession(
                id: Encodings.randomToken(), did: account.did, clientID: clientID, thumbprint: request.thumbprint,
                scope: scope, clientKeyID: nil, expiresAt: now.addingTimeInterval(lifetime))
            let expiresAt = Int64(request.accessExpiresAt.timeIntervalSince1970.rounded(.down))
            let claims = OAuthAccessClaims(
                issuer: oauthIssuer, subject: account.did, audience: context.pdsDID, clientID: clientID, scope: scope,
                issuedAt: min(Int64(now.timeIntervalSince1970), expiresAt), expiresAt: expiresAt,
                jti: Encodings.randomToken(), thumbprint: request.thumbprint)
            // Signed outside the lock: the refresh grants of a running benchmark share it.
            let grant = MintedGrant(session: session, accessJTI: claims.jti, accessToken: server.tokens.sign(claims),
                                    refreshToken: "ref-" + Encodings.randomToken(bytes: 32),
                                    accessExpiresAt: Date(timeIntervalSince1970: TimeInterval(expiresAt)))
            grants.append(grant)
            minted.append(MintedOAuthSession(
                did: account.did, handle: account.handle, accessToken: grant.accessToken, refreshToken: grant.refreshToken,
                accessExpiresAt: grant.accessExpiresAt, sessionStartedAt: now))
        }
        server.storage.withLock { storage in
            for grant in grants { storage.record(grant, refreshTokenExpiresAt: now.addingTimeInterval(lifetime)) }
        }
        return minted
    }

    /// The whole batch is refused before anything is created when one name cannot be used.
    private func checkNamesAvailable(_ names: [String]) throws(OAuthMintError) {
        let reserved: Set<String> = ["pds", "pds2", "plc", "auth", "rogue-auth", "clients"]
        var seen = Set<String>()
        for name in names.map({ $0.lowercased() }) {
            guard !name.isEmpty, !reserved.contains(name), seen.insert(name).inserted,
                  context.accounts.account(handle: context.handle(forName: name)) == nil
            else { throw .nameUnavailable(name) }
        }
    }

    /// Every refresh grant's margin so far (see `OAuthRefreshMargin`), oldest first: one entry per
    /// grant that rotated the tokens of a session whose access token expiry was known.
    public var oauthRefreshMargins: [OAuthRefreshMargin] { context.oauth.refreshMargins.all }
}

/// A minted session's grant, as recorded in the authorization server's storage.
struct MintedGrant {
    let session: OAuthSession
    let accessJTI: String
    let accessToken: String
    let refreshToken: String
    let accessExpiresAt: Date
}

extension AuthorizationServerState.Storage {
    /// Records a minted session and its tokens as the code exchange records a new one.
    mutating func record(_ grant: MintedGrant, refreshTokenExpiresAt: Date) {
        sessions[grant.session.id] = grant.session
        recordIssuedTokens(sessionID: grant.session.id, accessJTI: grant.accessJTI, accessExpiresAt: grant.accessExpiresAt,
                           refreshToken: grant.refreshToken, refreshTokenExpiresAt: refreshTokenExpiresAt)
    }
}
