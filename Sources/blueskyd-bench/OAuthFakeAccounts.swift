import ATOAuth
import ATTestbed
import BlueskyStore
import DPoP
import Foundation

/// Registers OAuth accounts by writing the daemon's store directly, as blueskyd itself would
/// have after their logins: one record per session minted at the testbed (same DID, client_id,
/// scope and token endpoint), each with its own DPoP key, secrets sealed with the store key.
enum OAuthFakeAccounts {
    /// The client the sessions are minted for: blueskyd's own loopback client, as a login on
    /// this callback port would have made it (the port only matters inside the client_id).
    static let loopbackClient = try! LoopbackClient(port: 49_152)

    /// The session facts every seeded account shares.
    static func sessionInfo(issuer: String, startedAt: Date) -> OAuthSessionInfo {
        OAuthSessionInfo(
            issuer: issuer, tokenEndpoint: issuer + "/oauth/token", revocationEndpoint: issuer + "/oauth/revoke",
            scope: loopbackClient.scope, sessionStartedAt: startedAt, clientKind: .loopback,
            clientID: loopbackClient.clientID)
    }

    /// Writes one account per minted session into `<stateDirectory>` (see `FakeAccounts.write`).
    ///
    /// `issuedAt` is when each account's current tokens count as issued (`lastRefreshAt`): the
    /// daemon's lead time is a quarter of the token's life at most, so it must be long ago enough
    /// for the full `refresh_ahead_seconds` to apply.
    static func seed(stateDirectory: String, sessions: [MintedOAuthSession], keys: [DPoPKey], issuer: String,
                     pdsURL: String, issuedAt: (MintedOAuthSession) -> Date) throws {
        precondition(sessions.count == keys.count)
        try FakeAccounts.write(stateDirectory: stateDirectory, count: sessions.count) { index in
            account(sessions[index], key: keys[index], isDefault: index == 0, issuer: issuer, pdsURL: pdsURL,
                    issuedAt: issuedAt(sessions[index]))
        }
    }

    static func account(_ session: MintedOAuthSession, key: DPoPKey, isDefault: Bool, issuer: String, pdsURL: String,
                        issuedAt: Date) -> (record: AccountRecord, secrets: AccountSecrets) {
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
