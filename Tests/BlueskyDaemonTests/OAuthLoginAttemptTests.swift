import ATOAuth
@testable import BlueskyDaemon
import BlueskyTesting
import Foundation
import Testing

@Suite("An OAuth login's outcome, for its waiters")
struct OAuthLoginAttemptTests {
    static func attempt() async throws -> OAuthLoginAttempt {
        let listener = try await LoopbackCallbackListener.start { _ in .init(status: .ok, text: "") }
        let url = URL(string: "https://auth.example.test/oauth/token")!
        let endpoints = AuthorizationServerEndpoints(issuer: "https://auth.example.test", authorization: url, token: url,
                                                     pushedAuthorizationRequest: url, revocation: nil)
        let client = OAuthClientIdentity.LoginClient(clientID: "http://localhost", redirectURI: "http://127.0.0.1:1/callback",
                                                     scope: "atproto", authentication: .none(clientID: "http://localhost"),
                                                     kind: .loopback, keyID: nil)
        return OAuthLoginAttempt(id: "l1", state: "s1", flow: .atproto(endpoints, client),
                                 expectedDID: nil, makeDefault: false, startedAt: Date(), listener: listener)
    }

    @Test("waiting times out with nil, even with a timeout shorter than the registration; the outcome reaches every waiter")
    func waitAndFinish() async throws {
        let attempt = try await Self.attempt()
        await withTearDown { await attempt.listener?.close() } run: {
            for _ in 0..<50 { #expect(await attempt.wait(timeout: .nanoseconds(1)) == nil) }
            let id = UUID()
            async let first = attempt.wait(timeout: .seconds(30))
            async let second = attempt.wait(timeout: .seconds(30))
            #expect(attempt.claim())
            #expect(!attempt.claim(), "one callback finishes a login")
            attempt.finish(.success(id))
            #expect(await first == .success(id))
            #expect(await second == .success(id))
            attempt.finish(.failure(.cancelled))
            #expect(await attempt.wait(timeout: .seconds(1)) == .success(id), "the first outcome stays")
        }
    }
}
