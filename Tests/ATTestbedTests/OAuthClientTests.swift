import ATOAuth
import ATTestbed
import BlueskyHTTP
import Crypto
import DPoP
import Foundation
import Testing

/// Hosted clients whose metadata the testbed serves at `clients.<domain>`: public ones, and
/// confidential ones authenticating with `private_key_jwt`.
@Suite("Testbed OAuth hosted clients")
struct OAuthClientTests {
    static let redirectURI = "https://app.example.com/oauth/callback"
    static let scope = "atproto transition:generic"

    private func publishPublicClient(_ fixture: OAuthFixture) throws -> OAuthFixture.TestClient {
        let clientID = fixture.testbed.oauthClientID(path: "/public/client-metadata.json")
        let document = try ClientMetadataDocument.publicClient(
            clientID: clientID, redirectURIs: [Self.redirectURI], scope: Self.scope)
        fixture.testbed.publishOAuthClientMetadata(path: "/public/client-metadata.json", document: try document.encodedJSON())
        return OAuthFixture.TestClient(authentication: .none(clientID: clientID), redirectURI: Self.redirectURI,
                                       scope: Self.scope)
    }

    private func publishConfidentialClient(_ fixture: OAuthFixture, keys: [ClientSigningKey]) throws -> String {
        let clientID = fixture.testbed.oauthClientID(path: "/confidential/client-metadata.json")
        let document = try ClientMetadataDocument.confidentialClient(
            clientID: clientID, redirectURIs: [Self.redirectURI], scope: Self.scope, keys: keys)
        fixture.testbed.publishOAuthClientMetadata(
            path: "/confidential/client-metadata.json", document: try document.encodedJSON())
        return clientID
    }

    private func confidential(_ clientID: String, _ key: ClientSigningKey) -> OAuthFixture.TestClient {
        OAuthFixture.TestClient(authentication: .privateKeyJWT(clientID: clientID, key: key),
                                redirectURI: Self.redirectURI, scope: Self.scope)
    }

    @Test("A hosted public client logs in; its metadata is served at clients.<domain>")
    func hostedPublicClient() async throws {
        try await OAuthFixture.with { fixture in
            let account = await fixture.testbed.createAccount(AccountSpec(name: "alice"))
            let client = try publishPublicClient(fixture)
            let served = try await fixture.get(client.clientID)
            #expect(served.status == 200)
            let login = try await fixture.login(account, client: client)
            #expect(try await fixture.getSession(login).status == 200)
            // A redirect URI the document does not list is refused.
            let endpoints = try await fixture.discover()
            let error = await #expect(throws: OAuthClientError.self) {
                try await fixture.push(account, endpoints: endpoints, client: client,
                                       redirectURI: "https://app.example.com/elsewhere")
            }
            #expect(error?.serverError?.error == "invalid_request")
        }
    }

    @Test("An https client_id without a served document is an invalid client")
    func unknownHostedClient() async throws {
        try await OAuthFixture.with { fixture in
            let account = await fixture.testbed.createAccount(AccountSpec(name: "bob"))
            let client = OAuthFixture.TestClient(
                authentication: .none(clientID: fixture.testbed.oauthClientID(path: "/missing.json")),
                redirectURI: Self.redirectURI, scope: Self.scope)
            let endpoints = try await fixture.discover()
            let error = await #expect(throws: OAuthClientError.self) {
                try await fixture.push(account, endpoints: endpoints, client: client)
            }
            #expect(error?.serverError?.error == "invalid_client")
            #expect(fixture.testbed.oauthStats(did: account.did).clientAuthenticationFailures == 1)
        }
    }

    @Test("A confidential client authenticates with private_key_jwt and must keep its key for the session")
    func confidentialClient() async throws {
        try await OAuthFixture.with { fixture in
            let account = await fixture.testbed.createAccount(AccountSpec(name: "carol"))
            let first = ClientSigningKey(keyID: "key-1", privateKey: P256.Signing.PrivateKey())
            let second = ClientSigningKey(keyID: "key-2", privateKey: P256.Signing.PrivateKey())
            let clientID = try publishConfidentialClient(fixture, keys: [first, second])

            var login = try await fixture.login(account, client: confidential(clientID, first))
            login.tokens = try await fixture.refresh(login)
            #expect(try await fixture.getSession(login).status == 200)

            // Another published key is still not the session's key.
            var switched = login
            switched.client = confidential(clientID, second)
            let changed = await #expect(throws: OAuthClientError.self) { try await fixture.refresh(switched) }
            #expect(changed?.serverError?.errorDescription == "Client authentication key changed during the session")

            // Without an assertion the client is not authenticated at all.
            var unauthenticated = login
            unauthenticated.client.authentication = .none(clientID: clientID)
            let missing = await #expect(throws: OAuthClientError.self) { try await fixture.refresh(unauthenticated) }
            #expect(missing?.serverError?.error == "invalid_client")

            // A key the client does not publish is refused.
            var stranger = login
            stranger.client = confidential(clientID, ClientSigningKey(keyID: "key-1", privateKey: P256.Signing.PrivateKey()))
            let forged = await #expect(throws: OAuthClientError.self) { try await fixture.refresh(stranger) }
            #expect(forged?.serverError?.errorDescription == "client_assertion signature verification failed")

            let stats = fixture.testbed.oauthStats(did: account.did)
            #expect(stats.refreshes == 1)
            #expect(stats.clientAuthenticationFailures == 2)
            _ = try await fixture.refresh(login)
        }
    }

    @Test("A confidential client's session outlives the public 14 days")
    func confidentialLifetime() async throws {
        try await OAuthFixture.with { fixture in
            let account = await fixture.testbed.createAccount(AccountSpec(name: "dave"))
            let key = ClientSigningKey(keyID: "k", privateKey: P256.Signing.PrivateKey())
            let clientID = try publishConfidentialClient(fixture, keys: [key])
            var login = try await fixture.login(account, client: confidential(clientID, key))
            fixture.testbed.advanceClock(by: .seconds(20 * 24 * 3600))
            login.tokens = try await fixture.refresh(login)
            // But an unused refresh token lapses after the 3-month idle limit.
            fixture.testbed.advanceClock(by: .seconds(91 * 24 * 3600))
            let error = await #expect(throws: OAuthClientError.self) { try await fixture.refresh(login) }
            #expect(error?.serverError?.errorDescription == "Refresh token expired")
        }
    }
}
