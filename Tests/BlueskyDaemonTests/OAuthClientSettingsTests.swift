import ATOAuth
@testable import BlueskyDaemon
import AccountStoreCore
import Crypto
import Foundation
import Logging
import Testing

@Suite("The configured OAuth client: settings rules, the client of a login, the document to publish")
struct OAuthClientSettingsTests {
    static func settings(_ toml: String) throws -> OAuthClientSettings {
        var configuration = DaemonConfiguration(environment: ["HOME": "/home/u"])
        try configuration.apply(toml: toml, file: "b.toml")
        try configuration.oauthClient.validate()
        return configuration.oauthClient
    }

    static func rejection(_ toml: String) -> String? {
        do {
            _ = try settings(toml)
            return nil
        } catch {
            return "\(error)"
        }
    }

    @Test("the file's oauth_* keys make a loopback, hosted public or confidential client")
    func kinds() throws {
        #expect(try Self.settings("").kind == .loopback)
        #expect(try Self.settings("oauth_client_id = \"\"\noauth_client_auth = \"none\"").kind == .loopback)
        let native = try Self.settings("""
            oauth_client_id = "https://example.com/client.json"
            oauth_redirect_uri = "http://127.0.0.1/cb"
            """)
        #expect(native.kind == .hostedPublic && native.receivesRedirect)
        let confidential = try Self.settings("""
            oauth_client_id = "https://example.com/client.json"
            oauth_redirect_uri = "https://example.com/callback"
            oauth_client_auth = "private_key_jwt"
            """)
        #expect(confidential.kind == .confidential && !confidential.receivesRedirect)
    }

    @Test("each broken combination is refused at start with a message naming the key")
    func rules() {
        #expect(Self.rejection("oauth_client_id = \"http://example.com/c.json\"\noauth_redirect_uri = \"https://example.com/cb\"")?
            .contains("oauth_client_id must be the https URL") == true)
        #expect(Self.rejection("oauth_client_id = \"https://example.com/c.json\"")?.contains("needs oauth_redirect_uri") == true)
        #expect(Self.rejection("oauth_redirect_uri = \"http://127.0.0.1/cb\"")?.contains("oauth_client_id is not") == true)
        #expect(Self.rejection("oauth_client_auth = \"private_key_jwt\"")?.contains("needs a hosted oauth_client_id") == true)
        #expect(Self.rejection("""
            oauth_client_id = "https://example.com/c.json"
            oauth_redirect_uri = "http://127.0.0.1/cb"
            oauth_client_auth = "private_key_jwt"
            """)?.contains("must redirect to an https page") == true)
        #expect(Self.rejection("""
            oauth_client_id = "https://example.com/c.json"
            oauth_redirect_uri = "http://localhost/cb"
            """)?.contains("oauth_redirect_uri must be") == true, "servers refuse localhost as a redirect host")
        #expect(Self.rejection("oauth_client_auth = \"client_secret_basic\"")?.contains("b.toml:1: oauth_client_auth") == true)
        #expect(Self.rejection("oauth_scope = \"transition:generic\"")?.contains("must contain atproto") == true)
    }

    @Test("a native client's loopback redirect gets the listener's port unless it names one; scopes stay within the document's")
    func loginClient() throws {
        let native = OAuthClientIdentity(settings: try Self.settings("""
            oauth_client_id = "https://example.com/client.json"
            oauth_redirect_uri = "http://127.0.0.1/cb"
            """), keys: [])
        let target = try #require(native.callbackListenTarget)
        #expect(target.host == "127.0.0.1" && target.port == nil && target.path == "/cb")
        let client = try native.loginClient(listenerPort: 4321, scope: "atproto")
        #expect(client.redirectURI == "http://127.0.0.1:4321/cb")
        #expect(client.clientID == "https://example.com/client.json" && client.kind == .hostedPublic && client.keyID == nil)
        #expect(throws: DaemonError.self) { try native.loginClient(listenerPort: 4321, scope: "atproto transition:chat.bsky") }
        #expect(OAuthClientIdentity.redirect("http://127.0.0.1:8080/cb", port: 4321) == "http://127.0.0.1:8080/cb")

        let loopback = OAuthClientIdentity(settings: OAuthClientSettings(), keys: [])
        let development = try loopback.loginClient(listenerPort: 5000, scope: nil)
        #expect(development.kind == .loopback && development.redirectURI == "http://127.0.0.1:5000/callback")
        #expect(development.clientID.hasPrefix("http://localhost?redirect_uri="))
        #expect(try loopback.metadataDocument() == nil)
    }

    @Test("a confidential client signs with its newest key; a session keeps the key it is bound to, and fails clearly without it")
    func confidentialKeys() throws {
        let settings = try Self.settings("""
            oauth_client_id = "https://example.com/client.json"
            oauth_redirect_uri = "https://example.com/callback"
            oauth_client_auth = "private_key_jwt"
            """)
        let old = ClientSigningKey(keyID: "k-old", privateKey: P256.Signing.PrivateKey())
        let new = ClientSigningKey(keyID: "k-new", privateKey: P256.Signing.PrivateKey())
        let identity = OAuthClientIdentity(settings: settings, keys: [old, new])
        #expect(identity.callbackListenTarget == nil, "a web redirect is pasted")
        let client = try identity.loginClient(listenerPort: nil, scope: nil)
        #expect(client.kind == .confidential && client.keyID == "k-new" && client.redirectURI == "https://example.com/callback")
        identity.release(client.keyID)

        var info = OAuthSessionInfo(issuer: "https://auth.example.test", tokenEndpoint: "https://auth.example.test/token",
                                    revocationEndpoint: nil, scope: "atproto", sessionStartedAt: Date(), clientKind: .confidential,
                                    clientID: "https://example.com/client.json", clientKeyID: "k-old")
        guard case .privateKeyJWT(_, let key) = identity.authentication(for: info) else {
            Issue.record("a confidential session authenticates with private_key_jwt")
            return
        }
        #expect(key.keyID == "k-old")
        info.clientKeyID = "k-gone"
        #expect(identity.authentication(for: info) == nil, "a session whose key is gone cannot authenticate")

        let document = try #require(try identity.metadataDocument())
        #expect(document.tokenEndpointAuthMethod == "private_key_jwt")
        #expect(document.jwks?.keys.map(\.kid) == ["k-old", "k-new"], "old keys stay published while sessions use them")
        #expect(document.redirectURIs == ["https://example.com/callback"] && document.applicationType == "web")
    }

    @Test("a confidential client gets its key at first start; rotation keeps the keys of logins in progress, then drops unused ones")
    func keyRotation() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("client-keys-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = MemoryAccountStore()
        let settings = try Self.settings("""
            oauth_client_id = "https://example.com/client.json"
            oauth_redirect_uri = "https://example.com/callback"
            oauth_client_auth = "private_key_jwt"
            """)
        let identity = try await OAuthClientIdentity.load(settings: settings, store: store, now: Date(), logger: .init(label: "test"))
        let first = try #require(identity.signingKeys.first?.keyID)
        #expect(first.hasPrefix("blueskyd-") && identity.signingKeys.count == 1)
        let again = try await OAuthClientIdentity.load(settings: settings, store: store, now: Date(), logger: .init(label: "test"))
        #expect(again.signingKeys.map(\.keyID) == [first], "the same key at the next start")

        // A login in progress reserved the first key: a rotation keeps it.
        let inProgress = try identity.loginClient(listenerPort: nil, scope: nil)
        #expect(inProgress.keyID == first)
        let (second, removedNone) = try await identity.rotateKey(store: store, now: Date())
        #expect(removedNone.isEmpty && identity.signingKeys.map(\.keyID) == [first, second])
        let next = try identity.loginClient(listenerPort: nil, scope: nil)
        #expect(next.keyID == second, "the new key signs new logins")
        identity.release(next.keyID)
        // Once that login ended (and stored no session), the next rotation drops both.
        identity.release(inProgress.keyID)
        let (third, removed) = try await identity.rotateKey(store: store, now: Date())
        #expect(Set(removed) == [first, second] && identity.signingKeys.map(\.keyID) == [third])
        #expect(try await store.clientKeys().map(\.keyID) == [third])

        let loopback = OAuthClientIdentity(settings: OAuthClientSettings(), keys: [])
        await #expect { try await loopback.rotateKey(store: store, now: Date()) } throws: {
            "\($0)".contains("not configured as a confidential")
        }
    }
}
