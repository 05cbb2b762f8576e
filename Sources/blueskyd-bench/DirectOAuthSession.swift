import ATOAuth
import BlueskyHTTP
import DPoP
import Foundation

/// A second OAuth session for the benchmark account, logged in by the benchmark itself with
/// the ATOAuth pieces, as a program without the daemon would: the daemon never reveals its own
/// token or key, so the direct side of the OAuth sections needs a session of its own.
///
/// The flow is the loopback client's: discovery from the PDS, PAR with PKCE and a new DPoP key,
/// the authorization URL opened (the testbed approves at once and answers with the redirect,
/// which is read, not followed: nothing listens on the loopback port), the callback checked by
/// `PendingAuthorizations`, and the code exchanged for DPoP-bound tokens.
struct DirectOAuthSession: Sendable {
    let did: String
    /// The DPoP-bound access token (never printed).
    let accessToken: String
    let key: DPoPKey

    /// The port in the loopback client's redirect URI; the testbed ignores it.
    private static let loopbackPort = 8123

    static func login(upstream: UpstreamInfo, http: any HTTPFetching) async throws -> DirectOAuthSession {
        do {
            let endpoints = try await discover(pdsURL: upstream.pdsURL, http: http)
            let loopback = try LoopbackClient(port: loopbackPort)
            let server = OAuthServerClient(endpoints: endpoints, client: .none(clientID: loopback.clientID), http: http,
                                           nonces: DPoPNonceCache(), clockSkew: ClockSkewEstimator(),
                                           timeout: .seconds(30))
            let key = DPoPKey.generate()
            let pkce = PKCE.generate()
            let request = AuthorizationRequest(clientID: loopback.clientID, redirectURI: loopback.redirectURI,
                                               scope: loopback.scope, state: SecureRandom.state(), pkce: pkce,
                                               loginHint: upstream.handle)
            let pushed = try await server.pushAuthorization(request, dpopKey: key, nonceScope: upstream.handle)
            let pending = PendingAuthorizations()
            pending.insert(PendingAuthorization(state: request.state, issuer: endpoints.issuer, pkce: pkce,
                                                redirectURI: request.redirectURI, dpopKey: key,
                                                expectedDID: upstream.did, createdAt: Date()))
            guard let authorizationURL = OAuthRequests.authorizationURL(
                endpoint: endpoints.authorization, clientID: loopback.clientID, requestURI: pushed.requestURI) else {
                throw BenchError.oauthLoginFailed("no authorization URL")
            }
            let redirect = try await AuthorizationRedirect.follow(authorizationURL, http: http)
            let (authorization, code) = try pending.complete(try AuthorizationCallback(redirectURL: redirect))
            let tokens = try await server.exchangeCode(code, for: authorization, nonceScope: upstream.handle)
            return DirectOAuthSession(did: tokens.did.description, accessToken: tokens.accessToken, key: key)
        } catch let error as BenchError {
            throw error
        } catch {
            throw BenchError.oauthLoginFailed("direct login: \(describe(error))")
        }
    }

    /// PDS → protected-resource metadata → its issuer's metadata, through ATOAuth's checks.
    private static func discover(pdsURL: String, http: any HTTPFetching) async throws -> AuthorizationServerEndpoints {
        let resourceURL = pdsURL + "/.well-known/oauth-protected-resource"
        let resource = try ProtectedResourceMetadata(response: try await get(resourceURL, http: http), url: resourceURL)
        let issuer = try resource.validatedIssuer(pdsOrigin: pdsURL)
        let metadataURL = issuer + "/.well-known/oauth-authorization-server"
        return try AuthorizationServerMetadata(response: try await get(metadataURL, http: http), url: metadataURL)
            .validated(expectedIssuer: issuer, pdsOrigin: pdsURL)
    }

    private static func get(_ url: String, http: any HTTPFetching) async throws -> InboundResponse {
        guard let parsed = URL(string: url) else { throw BenchError.oauthLoginFailed("bad URL \(url)") }
        return try await http.send(OutboundRequest(url: parsed), timeout: .seconds(30))
    }
}

/// The user's visit to the authorization URL, for both logins: the testbed's authorization
/// server approves at once and answers 302 to the client's redirect URI, which is returned
/// (not followed).
enum AuthorizationRedirect {
    static func follow(_ authorizationURL: URL, http: any HTTPFetching) async throws -> URL {
        let response = try await http.send(OutboundRequest(url: authorizationURL), timeout: .seconds(30))
        guard response.status == 302, let location = response.header("Location"), let url = URL(string: location) else {
            throw BenchError.oauthLoginFailed("the authorization endpoint answered \(response.status), not a redirect")
        }
        return url
    }
}
