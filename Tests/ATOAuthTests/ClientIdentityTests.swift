import ATOAuth
import Crypto
import DPoP
import Foundation
import JSONRPC
import Testing

@Suite("Client identity: loopback client, metadata documents, client assertions")
struct ClientIdentityTests {
    @Test("the loopback client_id is http://localhost with the redirect URI and scope, percent-encoded")
    func loopback() throws {
        let client = try LoopbackClient(port: 8080, scope: "atproto transition:generic")
        #expect(client.redirectURI == "http://127.0.0.1:8080/callback")
        #expect(client.clientID ==
            "http://localhost?redirect_uri=http%3A%2F%2F127.0.0.1%3A8080%2Fcallback&scope=atproto%20transition%3Ageneric")
        // What a server reads back from it: the exact redirect URI and scope, on host localhost without port or path.
        let components = try #require(URLComponents(string: client.clientID))
        #expect(components.scheme == "http" && components.host == "localhost" && components.port == nil)
        #expect(components.path.isEmpty)
        #expect(components.queryItems == [URLQueryItem(name: "redirect_uri", value: client.redirectURI),
                                          URLQueryItem(name: "scope", value: "atproto transition:generic")])
    }

    @Test("a loopback client needs a real port and the atproto scope")
    func loopbackRules() {
        #expect(throws: ClientIdentityError.invalidPort(0)) { try LoopbackClient(port: 0) }
        #expect(throws: ClientIdentityError.invalidPort(65_536)) { try LoopbackClient(port: 65_536) }
        #expect(throws: ClientIdentityError.scopeLacksAtproto("transition:generic")) {
            try LoopbackClient(port: 8080, scope: "transition:generic")
        }
        #expect(throws: ClientIdentityError.scopeLacksAtproto("atprotox")) { try LoopbackClient(port: 8080, scope: "atprotox") }
    }

    @Test("a public hosted client document has the fields a server checks")
    func publicDocument() throws {
        let document = try ClientMetadataDocument.publicClient(
            clientID: "https://app.example.com/client-metadata.json", redirectURIs: ["https://app.example.com/callback"],
            scope: "atproto transition:generic", clientName: "Example")
        let json = try JSONValue.parse(document.encodedJSON())
        #expect(json["client_id"] == "https://app.example.com/client-metadata.json")
        #expect(json["grant_types"] == ["authorization_code", "refresh_token"])
        #expect(json["response_types"] == ["code"])
        #expect(json["redirect_uris"] == ["https://app.example.com/callback"])
        #expect(json["dpop_bound_access_tokens"] == true)
        #expect(json["token_endpoint_auth_method"] == "none")
        #expect(json["application_type"] == "web")
        #expect(json["jwks"] == nil && json["token_endpoint_auth_signing_alg"] == nil)
        #expect(!String(decoding: try document.encodedJSON(), as: UTF8.self).contains(#"\/"#))
    }

    @Test("a confidential client document publishes public keys only, with kid, and private_key_jwt")
    func confidentialDocument() throws {
        let key = ClientSigningKey(keyID: "key-2026", privateKey: P256.Signing.PrivateKey())
        let document = try ClientMetadataDocument.confidentialClient(
            clientID: "https://app.example.com/client-metadata.json", redirectURIs: ["https://app.example.com/callback"],
            scope: "atproto", keys: [key])
        let json = try JSONValue.parse(document.encodedJSON())
        #expect(json["token_endpoint_auth_method"] == "private_key_jwt")
        #expect(json["token_endpoint_auth_signing_alg"] == "ES256")
        let published = try #require(json["jwks"]?["keys"]?.arrayValue?.first?.objectValue)
        #expect(Set(published.keys) == ["kty", "crv", "x", "y", "kid", "alg", "use"])
        #expect(published["kid"] == "key-2026")
        #expect(published["x"]?.stringValue == key.publicJWK.x)
        #expect(!"\(key)".contains(Data(key.privateKey.rawRepresentation).base64EncodedString()))

        #expect(throws: ClientIdentityError.confidentialWithoutKeys) {
            try ClientMetadataDocument.confidentialClient(clientID: "https://a.example/c.json", redirectURIs: ["https://a.example/cb"],
                                                          scope: "atproto", keys: [])
        }
        #expect(throws: ClientIdentityError.duplicateKeyID("k")) {
            let twins = [ClientSigningKey(keyID: "k", privateKey: .init()), ClientSigningKey(keyID: "k", privateKey: .init())]
            return try ClientMetadataDocument.confidentialClient(clientID: "https://a.example/c.json",
                                                                 redirectURIs: ["https://a.example/cb"], scope: "atproto", keys: twins)
        }
    }

    @Test("hosted documents: https client_id, a redirect URI, atproto scope")
    func documentRules() {
        func make(_ id: String, _ redirects: [String], _ scope: String) throws -> ClientMetadataDocument {
            try ClientMetadataDocument.publicClient(clientID: id, redirectURIs: redirects, scope: scope)
        }
        #expect(throws: ClientIdentityError.clientIDNotHTTPS("http://app.example.com/c.json")) {
            try make("http://app.example.com/c.json", ["https://app.example.com/cb"], "atproto")
        }
        #expect(throws: ClientIdentityError.noRedirectURI) { try make("https://app.example.com/c.json", [], "atproto") }
        #expect(throws: ClientIdentityError.invalidRedirectURI("/callback")) {
            try make("https://app.example.com/c.json", ["/callback"], "atproto")
        }
        #expect(throws: ClientIdentityError.scopeLacksAtproto("transition:generic")) {
            try make("https://app.example.com/c.json", ["https://app.example.com/cb"], "transition:generic")
        }
    }

    @Test("a client assertion is ES256 with kid; iss = sub = client_id, aud = issuer, unique jti, 60 s life")
    func assertion() throws {
        let key = ClientSigningKey(keyID: "k1", privateKey: P256.Signing.PrivateKey())
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let clientID = "https://app.example.com/client-metadata.json"
        let first = try ClientAssertion.make(key: key, clientID: clientID, issuer: "https://auth.example.com", now: now)
        let second = try ClientAssertion.make(key: key, clientID: clientID, issuer: "https://auth.example.com", now: now)
        let parts = first.split(separator: ".").map(String.init)
        #expect(parts.count == 3)
        let header = try JSONValue.parse(try #require(base64URL(parts[0])))
        let claims = try JSONValue.parse(try #require(base64URL(parts[1])))
        #expect(header == ["alg": "ES256", "kid": "k1", "typ": "JWT"])
        #expect(claims["iss"]?.stringValue == clientID && claims["sub"]?.stringValue == clientID)
        #expect(claims["aud"] == "https://auth.example.com")
        #expect(claims["iat"]?.intValue == 1_800_000_000 && claims["exp"]?.intValue == 1_800_000_060)
        let secondClaims = try JSONValue.parse(try #require(base64URL(second.split(separator: ".").map(String.init)[1])))
        #expect(claims["jti"] != nil && claims["jti"] != secondClaims["jti"])
        // Verified with CryptoKit, not with our own code.
        let signature = try P256.Signing.ECDSASignature(rawRepresentation: try #require(base64URL(parts[2])))
        #expect(key.privateKey.publicKey.isValidSignature(signature, for: Data((parts[0] + "." + parts[1]).utf8)))
    }

    @Test("client authentication adds client_id, and for confidential clients the assertion")
    func authentication() throws {
        var publicForm = FormBody()
        try ClientAuthentication.none(clientID: "http://localhost").authenticate(&publicForm, issuer: "https://a.example")
        #expect(publicForm.fields.map(\.name) == ["client_id"])
        var confidentialForm = FormBody()
        let key = ClientSigningKey(keyID: "k1", privateKey: P256.Signing.PrivateKey())
        try ClientAuthentication.privateKeyJWT(clientID: "https://app.example.com/c.json", key: key)
            .authenticate(&confidentialForm, issuer: "https://a.example")
        #expect(confidentialForm.fields.map(\.name) == ["client_id", "client_assertion_type", "client_assertion"])
        #expect(confidentialForm["client_assertion_type"] == "urn:ietf:params:oauth:client-assertion-type:jwt-bearer")
    }

    func base64URL(_ text: String) -> [UInt8]? {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        return Data(base64Encoded: base64).map(Array.init)
    }
}
