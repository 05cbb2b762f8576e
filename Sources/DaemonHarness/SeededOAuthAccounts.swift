import ATOAuth
import ATTestbed
import AccountStoreCore
import DPoP
import Foundation

/// OAuth accounts written straight into a store, as blueskyd itself would have written them
/// after their logins: one record per session minted at the testbed (same DID, client_id,
/// scope and token endpoint), each with its own DPoP key. For benchmarks and tests that need
/// thousands of signed-in accounts without thousands of browser logins.
public enum SeededOAuthAccounts {
    /// The client the sessions are minted for: blueskyd's own loopback client, as a login on
    /// this callback port would have made it (the port only matters inside the client_id).
    public static let loopbackClient = try! LoopbackClient(port: 49_152)

    /// Mints one session per name at `testbed` for `loopbackClient`, each bound to a new DPoP
    /// key, with its first access token expiring at `accessExpiresAt`.
    public static func mint(at testbed: Testbed, names: [String], accessExpiresAt: Date) throws
        -> [(session: MintedOAuthSession, key: DPoPKey)]
    {
        let keys = names.map { _ in DPoPKey.generate() }
        let sessions = try testbed.mintOAuthSessions(
            zip(names, keys).map { OAuthSessionMintRequest(name: $0, thumbprint: $1.thumbprint, accessExpiresAt: accessExpiresAt) },
            clientID: loopbackClient.clientID, scope: loopbackClient.scope)
        return Array(zip(sessions, keys))
    }

    /// The session facts every seeded account shares.
    static func sessionInfo(issuer: String, startedAt: Date) -> OAuthSessionInfo {
        OAuthSessionInfo(
            issuer: issuer, tokenEndpoint: issuer + "/oauth/token", revocationEndpoint: issuer + "/oauth/revoke",
            scope: loopbackClient.scope, sessionStartedAt: startedAt, clientKind: .loopback,
            clientID: loopbackClient.clientID)
    }

    /// The record and secrets of one minted session. `issuedAt` is when its current tokens
    /// count as issued (`lastRefreshAt`): blueskyd's lead is a quarter of a token's life at
    /// most, so it must be long enough ago for the full `refresh_ahead_seconds` to apply.
    public static func account(_ session: MintedOAuthSession, key: DPoPKey, isDefault: Bool, issuer: String,
                               pdsURL: String, issuedAt: Date) -> (record: AccountRecord, secrets: AccountSecrets) {
        let info = sessionInfo(issuer: issuer, startedAt: session.sessionStartedAt)
        let record = AccountRecord(
            did: session.did, handle: session.handle, handleVerified: true, pds: pdsURL, authKind: .oauth,
            state: .active, isDefault: isDefault, createdAt: session.sessionStartedAt, lastRefreshAt: issuedAt,
            accessExpiresAt: session.accessExpiresAt, refreshExpiresAt: info.sessionEndsAt, oauth: info)
        let secrets = AccountSecrets(accessToken: session.accessToken, refreshToken: session.refreshToken,
                                     dpopPrivateKey: key.rawRepresentation)
        return (record, secrets)
    }
}
