import ATOAuth
import ATTestbed
import BlueskyHTTP
import DPoP
import Foundation
import JSONRPC
import Testing

/// Sessions minted in bulk (no browser login) behave like logged-in ones, and every refresh
/// grant's margin before the old access token's expiry is recorded.
@Suite("Testbed minted OAuth sessions")
struct MintedOAuthSessionTests {
    @Test("Minted sessions call the PDS, refresh with their own DPoP key only, and resolve at the PLC")
    func mintedSessionsWork() async throws {
        try await OAuthFixture.with { fixture in
            let endpoints = try await fixture.discover()
            let keys = (0..<3).map { _ in DPoPKey.generate() }
            let expiry = fixture.testbed.now.addingTimeInterval(600)
            let minted = try fixture.testbed.mintOAuthSessions(
                keys.enumerated().map { OAuthSessionMintRequest(name: "minted-\($0.offset)", thumbprint: $0.element.thumbprint,
                                                                 accessExpiresAt: expiry) },
                clientID: fixture.loopback.clientID, scope: fixture.loopback.scope)
            #expect(minted.count == 3)
            #expect(Set(minted.map(\.did)).count == 3)
            #expect(minted.allSatisfy { $0.did.hasPrefix("did:plc:") && $0.accessExpiresAt == Date(timeIntervalSince1970: expiry.timeIntervalSince1970.rounded(.down)) })
            #expect(minted[1].handle == "minted-1.\(fixture.testbed.configuration.domain)")

            // The access token is DPoP-bound to the session's key, as after a code exchange.
            let getSession = try #require(URL(string: fixture.testbed.pdsURL + "/xrpc/com.atproto.server.getSession"))
            let call = try await fixture.resource.send(OutboundRequest(url: getSession), accessToken: minted[0].accessToken,
                                                       dpopKey: keys[0], account: minted[0].did)
            #expect(call.status == 200)

            // Another key cannot refresh the session; its own key can, and the margin is recorded.
            let wrongKey = await #expect(throws: OAuthClientError.self) {
                try await fixture.server(endpoints).refresh(refreshToken: minted[1].refreshToken, dpopKey: keys[0], did: minted[1].did)
            }
            #expect(wrongKey?.serverError?.errorDescription == "Invalid DPoP key binding")
            let refreshedAt = fixture.testbed.now
            let tokens = try await fixture.server(endpoints).refresh(
                refreshToken: minted[1].refreshToken, dpopKey: keys[1], did: minted[1].did)
            #expect(tokens.did.description == minted[1].did)
            #expect(tokens.scope == fixture.loopback.scope)
            let margins = fixture.testbed.oauthRefreshMargins
            #expect(margins.count == 1)
            let margin = try #require(margins.first)
            #expect(margin.did == minted[1].did)
            #expect(abs(margin.seconds - minted[1].accessExpiresAt.timeIntervalSince(refreshedAt)) < 5)
            #expect(!margin.lapsed)
            #expect(fixture.testbed.oauthStats(did: minted[1].did).refreshes == 1)
            #expect(fixture.testbed.oauthSessionCount(did: minted[2].did) == 1)

            // The new DID has a document naming the testbed's PDS, so identity checks find it.
            let document = try await fixture.get(fixture.testbed.plcURL + "/" + minted[2].did)
            #expect(document.status == 200)
            let parsed = try JSONValue.parse(document.body)
            #expect(parsed["id"]?.stringValue == minted[2].did)
            #expect(parsed["service"]?.arrayValue?.first?["serviceEndpoint"]?.stringValue == fixture.testbed.pdsURL)
        }
    }

    @Test("A refresh after the access token expired is counted as lapsed, with a negative margin")
    func lapsedRefresh() async throws {
        try await OAuthFixture.with { fixture in
            let endpoints = try await fixture.discover()
            let key = DPoPKey.generate()
            let minted = try fixture.testbed.mintOAuthSessions(
                [OAuthSessionMintRequest(name: "late", thumbprint: key.thumbprint,
                                         accessExpiresAt: fixture.testbed.now.addingTimeInterval(5))],
                clientID: fixture.loopback.clientID, scope: fixture.loopback.scope)
            fixture.testbed.advanceClock(by: .seconds(65))
            _ = try await fixture.server(endpoints).refresh(refreshToken: minted[0].refreshToken, dpopKey: key, did: minted[0].did)
            let margin = try #require(fixture.testbed.oauthRefreshMargins.first)
            #expect(margin.lapsed)
            #expect(margin.seconds < -55 && margin.seconds > -65)
            #expect(fixture.testbed.oauthStats(did: minted[0].did).refreshesAfterAccessExpiry == 1)
            #expect(fixture.testbed.oauthTotals.refreshesAfterAccessExpiry == 1)
        }
    }

    @Test("A logged-in session's refresh is measured against its newest access token")
    func loggedInRefreshMargins() async throws {
        try await OAuthFixture.with({ $0.oauthAccessTokenLifetime = .seconds(300) }) { fixture in
            let account = await fixture.testbed.createAccount(AccountSpec(name: "alice"))
            let started = ContinuousClock.now
            var login = try await fixture.login(account)
            fixture.testbed.advanceClock(by: .seconds(100))
            login.tokens = try await fixture.refresh(login)
            fixture.testbed.advanceClock(by: .seconds(250))
            login.tokens = try await fixture.refresh(login)
            let margins = fixture.testbed.oauthRefreshMargins.map(\.seconds)
            // The testbed's clock also runs in real time, which a loaded machine stretches; a
            // token's `exp` is whole seconds, so up to one more is lost to its rounding down
            // (a run of 0.92 s saw a margin of 199.04).
            let ran = (ContinuousClock.now - started) / .seconds(1) + 1
            #expect(margins.count == 2)
            // 300 s tokens: 200 s left after 100 s, then 50 s left of the second token after 250 s
            // (measured against the first token it would be -50 s).
            #expect(margins.count == 2 && (200 - ran...200.5).contains(margins[0]) && (50 - ran...50.5).contains(margins[1]),
                    "\(margins) within \(ran) s")
            fixture.testbed.resetOAuth()
            #expect(fixture.testbed.oauthRefreshMargins.isEmpty)
        }
    }

    @Test("Minting refuses invalid clients, scopes beyond the client's and taken names, creating nothing")
    func mintingRefusals() async throws {
        try await OAuthFixture.with { fixture in
            let testbed = fixture.testbed
            _ = await testbed.createAccount(AccountSpec(name: "taken"))
            let before = testbed.accounts.count
            let request = { (name: String) in
                OAuthSessionMintRequest(name: name, thumbprint: DPoPKey.generate().thumbprint, accessExpiresAt: testbed.now)
            }
            let loopback = fixture.loopback
            #expect(throws: OAuthMintError.self) {
                try testbed.mintOAuthSessions([request("a")], clientID: "http://localhost:8080", scope: "atproto")
            }
            #expect(throws: OAuthMintError.scopeNotAllowed("atproto transition:chat.bsky")) {
                try testbed.mintOAuthSessions([request("a")], clientID: loopback.clientID, scope: "atproto transition:chat.bsky")
            }
            for names in [["a", "pds"], ["a", "taken"], ["b", "B"]] {
                #expect(throws: OAuthMintError.self) {
                    try testbed.mintOAuthSessions(names.map(request), clientID: loopback.clientID, scope: loopback.scope)
                }
            }
            #expect(testbed.accounts.count == before)
        }
    }
}
