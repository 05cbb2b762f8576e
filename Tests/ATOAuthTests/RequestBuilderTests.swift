import ATOAuth
import Crypto
import Foundation
import Testing

@Suite("OAuth request builders")
struct RequestBuilderTests {
    let client = try! LoopbackClient(port: 8080, scope: "atproto transition:generic")
    let issuer = "https://auth.example.com"

    @Test("the PAR body has exactly the authorization request's parameters, form-encoded")
    func pushedAuthorization() throws {
        let pkce = try PKCE(verifier: "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk")
        let request = AuthorizationRequest(clientID: client.clientID, redirectURI: client.redirectURI, scope: client.scope,
                                           state: "st4te", pkce: pkce, loginHint: "alice.example.com")
        let form = try request.pushedAuthorizationForm(client: .none(clientID: client.clientID), issuer: issuer)
        #expect(form.fields.map(\.name) == ["response_type", "client_id", "redirect_uri", "scope", "state",
                                           "code_challenge", "code_challenge_method", "login_hint"])
        #expect(form["response_type"] == "code")
        #expect(form["code_challenge"] == "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM")
        #expect(form["code_challenge_method"] == "S256")
        #expect(form.fields.allSatisfy { $0.value != pkce.verifier })
        #expect(form.encoded == "response_type=code"
            + "&client_id=http%3A%2F%2Flocalhost%3Fredirect_uri%3Dhttp%253A%252F%252F127.0.0.1%253A8080%252Fcallback%26scope%3Datproto%2520transition%253Ageneric"
            + "&redirect_uri=http%3A%2F%2F127.0.0.1%3A8080%2Fcallback&scope=atproto+transition%3Ageneric&state=st4te"
            + "&code_challenge=E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM&code_challenge_method=S256&login_hint=alice.example.com")
        let withoutHint = AuthorizationRequest(clientID: "c", redirectURI: "r", scope: "atproto", state: "s", pkce: pkce)
        #expect(try withoutHint.pushedAuthorizationForm(client: .none(clientID: "c"), issuer: issuer)["login_hint"] == nil)
    }

    @Test("the authorization URL carries only client_id and request_uri")
    func authorizationURL() throws {
        let url = try #require(OAuthRequests.authorizationURL(
            endpoint: URL(string: "https://auth.example.com/oauth/authorize")!, clientID: client.clientID,
            requestURI: "urn:ietf:params:oauth:request_uri:req-abc"))
        let items = try #require(URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems)
        #expect(items == [URLQueryItem(name: "client_id", value: client.clientID),
                          URLQueryItem(name: "request_uri", value: "urn:ietf:params:oauth:request_uri:req-abc")])
        #expect(url.absoluteString.hasPrefix("https://auth.example.com/oauth/authorize?client_id=http%3A%2F%2Flocalhost%3F"))
    }

    @Test("token exchange, refresh and revocation bodies")
    func tokenForms() throws {
        let publicClient = ClientAuthentication.none(clientID: client.clientID)
        let exchange = try OAuthRequests.authorizationCodeForm(code: "c0de", redirectURI: client.redirectURI,
                                                               codeVerifier: "v", client: publicClient, issuer: issuer)
        #expect(exchange.fields.map(\.name) == ["grant_type", "code", "redirect_uri", "code_verifier", "client_id"])
        #expect(exchange["grant_type"] == "authorization_code" && exchange["client_id"] == client.clientID)

        let refresh = try OAuthRequests.refreshForm(refreshToken: "r+t", client: publicClient, issuer: issuer)
        #expect(refresh.encoded.hasPrefix("grant_type=refresh_token&refresh_token=r%2Bt&client_id="))

        let revoke = try OAuthRequests.revocationForm(token: "r+t", tokenTypeHint: .refreshToken, client: publicClient, issuer: issuer)
        #expect(revoke.fields.map(\.name) == ["token", "token_type_hint", "client_id"])
        #expect(revoke["token_type_hint"] == "refresh_token")
    }

    @Test("confidential clients sign an assertion addressed to the issuer for each request")
    func confidential() throws {
        let key = ClientSigningKey(keyID: "k1", privateKey: P256.Signing.PrivateKey())
        let auth = ClientAuthentication.privateKeyJWT(clientID: "https://app.example.com/c.json", key: key)
        let refresh = try OAuthRequests.refreshForm(refreshToken: "rt", client: auth, issuer: issuer)
        let assertion = try #require(refresh["client_assertion"])
        let claims = try #require(Data(base64Encoded: base64(assertion.split(separator: ".")[1])))
        let object = try #require(try JSONSerialization.jsonObject(with: claims) as? [String: Any])
        #expect(object["aud"] as? String == issuer)
    }

    func base64(_ text: Substring) -> String {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        return base64
    }
}
