import Foundation
import Synchronization
import WebBasics

/// Everything the request handlers share. Each part guards its own state; locks are held only
/// for in-memory work, never across I/O, and the clock's lock is the only one taken inside another.
final class TestbedContext: Sendable {
    let configuration: TestbedConfiguration
    private let boundPort: Atomic<Int>
    let clock = TestbedClock()
    let signer = TokenSigner()
    let accounts = AccountDirectory()
    let metrics = RequestMetrics()
    let failures = FailureInjector()
    /// Answers tests asked to stall or delay (`Testbed.shapeAnswers`).
    let shapes = AnswerShaper()
    let feed = FeedIndex()
    let tids = TIDGenerator()
    let oauth: TestbedOAuth
    /// Accounts that moved to the second PDS host (`pds2.<domain>`), and whether that host names
    /// the rogue issuer as its authorization server.
    let moves = PDSMoves()
    /// The Mastodon-compatible instance's apps, users and tokens (`social.<domain>`).
    let mastodon: MastodonState
    /// The generic OAuth 2.0 server's clients, users and tokens (`sso.<domain>`).
    let genericOAuth: GenericOAuthState

    init(configuration: TestbedConfiguration) {
        self.configuration = configuration
        boundPort = Atomic(configuration.port)
        oauth = TestbedOAuth(domain: configuration.domain, clock: clock, noncePeriod: configuration.dpopNonceRotationPeriod)
        mastodon = MastodonState(domain: configuration.domain)
        genericOAuth = GenericOAuthState(domain: configuration.domain)
    }

    /// The listening port; set once bound (port 0 only becomes known then).
    var port: Int {
        get { boundPort.load(ordering: .acquiring) }
        set { boundPort.store(newValue, ordering: .releasing) }
    }

    var domain: String { configuration.domain }
    var pdsHost: String { "pds.\(domain)" }
    /// The same PDS under a second name, where accounts "move" (`Testbed.movePDS`).
    var pdsAliasHost: String { "pds2.\(domain)" }
    var plcHost: String { "plc.\(domain)" }
    /// The PDS's service DID (the `aud` of its tokens).
    var pdsDID: String { "did:web:\(pdsHost)" }

    func url(host: String) -> String {
        // Spelled as the daemon spells origins, so URLs the testbed hands out compare equal to them.
        URLOrigin(scheme: "https", host: host, port: port)?.string ?? "https://\(host):\(port)"
    }

    var pdsURL: String { url(host: pdsHost) }
    var pdsAliasURL: String { url(host: pdsAliasHost) }

    /// The PDS URL an account's DID document names.
    func pdsURL(ofDID did: String) -> String {
        moves.hasMoved(did) ? pdsAliasURL : pdsURL
    }
    var plcURL: String { url(host: plcHost) }

    func handle(forName name: String) -> String { "\(name).\(domain)" }

    /// did:web ids carry a non-default port percent-encoded, as the did:web spec says.
    func webDID(forHandle handle: String) -> String {
        port == 443 ? "did:web:\(handle)" : "did:web:\(handle)%3A\(port)"
    }

    func accessTokenLifetime(for account: AccountState) -> Duration {
        account.accessTokenLifetime ?? configuration.accessTokenLifetime
    }

    func issueTokens(for account: AccountState, accessScope: String) -> IssuedTokens {
        signer.issuePair(
            did: account.did,
            audience: pdsDID,
            accessScope: accessScope,
            now: clock.now(),
            accessLifetime: accessTokenLifetime(for: account),
            refreshLifetime: configuration.refreshTokenLifetime
        )
    }
}
