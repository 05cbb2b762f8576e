import DPoP
import Synchronization

/// The OAuth side of a testbed: both authorization servers' state, the PDS's nonces and DPoP
/// verifier, the counters and the misbehaviours switched on.
final class TestbedOAuth: Sendable {
    /// The PDS's own authorization server (`auth.<domain>`).
    let issuer: AuthorizationServerState
    /// An authorization server no DID names (`rogue-auth.<domain>`).
    let rogueIssuer: AuthorizationServerState
    /// The PDS's nonces, separate from the authorization servers' as on real deployments.
    let pdsNonces: DPoPNonceSource
    let pdsVerifier: DPoPVerifier
    /// Client metadata documents served at `clients.<domain>`.
    let clients = OAuthClientDirectory()
    let clientsHost: String
    let metrics = OAuthMetrics()
    /// How long before its access token's expiry each session was refreshed.
    let refreshMargins = RefreshMarginLog()
    let misbehaviours = OAuthMisbehaviours()
    /// The last DPoP request the PDS accepted for each DID, for independent checks in tests.
    let lastResourceRequests = Mutex<[String: RecordedDPoPRequest]>([:])
    /// The latest requests to both authorization servers' PAR, token and revocation endpoints.
    let authorizationServerRequests = AuthorizationServerRequestLog()
    /// Who the authorize endpoint approves when the request has no `login_hint`.
    let defaultApprovalDID = Mutex<String?>(nil)

    init(domain: String, clock: TestbedClock, noncePeriod: Duration) {
        issuer = AuthorizationServerState(host: "auth.\(domain)", clock: clock, noncePeriod: noncePeriod)
        rogueIssuer = AuthorizationServerState(host: "rogue-auth.\(domain)", clock: clock, noncePeriod: noncePeriod)
        clientsHost = "clients.\(domain)"
        pdsNonces = DPoPNonceSource(period: noncePeriod, clock: clock)
        pdsVerifier = DPoPVerifier(now: { clock.now() })
    }

    func setNonceChurn(_ enabled: Bool) {
        issuer.nonces.churnsEveryResponse = enabled
        rogueIssuer.nonces.churnsEveryResponse = enabled
        pdsNonces.churnsEveryResponse = enabled
    }
}

/// A DPoP-bound request the PDS accepted, as it arrived: for checking the client's real proofs
/// with another verifier than the testbed's own.
public struct RecordedDPoPRequest: Sendable, Equatable {
    /// The `DPoP` header.
    public var proof: String
    public var method: String
    /// The target URI the proof had to name (the PDS origin and path, no query).
    public var htu: String
    public var accessToken: String
    /// The access token's `cnf.jkt`: the proof's key must have this thumbprint.
    public var boundThumbprint: String
}
