import ATOAuth
import AccountStoreCore
import DPoP
import Foundation
import Synchronization

/// The OAuth client blueskyd presents: the configured settings, and the signing keys of a
/// confidential client.
///
/// Every stored key is kept, whatever the settings say now: a session is bound to the client and
/// key it logged in with, so its refreshes and its logout go on using them after a configuration
/// change. New logins use the configured client and the newest key.
final class OAuthClientIdentity: Sendable {
    let settings: OAuthClientSettings
    private struct Keys {
        /// Oldest first; the last one signs new sessions' assertions.
        var all: [ClientSigningKey]
        /// Keys that logins in progress started with, and how many: rotation must keep them,
        /// since their sessions will be bound to them.
        var reserved: [String: Int] = [:]
    }
    private let keys: Mutex<Keys>
    /// One rotation at a time: two would each drop the other's new, still unused key.
    let rotation = AsyncLock()

    init(settings: OAuthClientSettings, keys: [ClientSigningKey]) {
        self.settings = settings
        self.keys = Mutex(Keys(all: keys))
    }

    /// What one login presents, and what its session records.
    struct LoginClient: Sendable {
        var clientID: String
        var redirectURI: String
        var scope: String
        var authentication: ClientAuthentication
        var kind: OAuthClientKind
        var keyID: String?
    }

    /// Where blueskyd listens for the browser's redirect; nil when the redirect goes to a web
    /// page and the user pastes the final address.
    var callbackListenTarget: (host: String, port: Int?, path: String)? {
        guard let redirect = settings.redirectURI else { return ("127.0.0.1", nil, LoopbackClient.callbackPath) }
        return OAuthClientSettings.loopbackRedirect(redirect)
    }

    /// The client of a new login. `listenerPort` is the port the callback listener got.
    func loginClient(listenerPort: Int?, scope requested: String?) throws(DaemonError) -> LoginClient {
        guard let clientID = settings.clientID, let redirect = settings.redirectURI else {
            guard let listenerPort else { throw .internalError("the loopback client has no callback listener") }
            let client: LoopbackClient
            do {
                client = try LoopbackClient(port: listenerPort, scope: requested ?? settings.scope)
            } catch {
                throw .invalidParams(error.description, field: "scope")
            }
            return LoginClient(clientID: client.clientID, redirectURI: client.redirectURI, scope: client.scope,
                               authentication: .none(clientID: client.clientID), kind: .loopback, keyID: nil)
        }
        let scope = requested ?? settings.scope
        let declared = Set(OAuthScope.tokens(settings.scope))
        guard OAuthScope.contains(scope, "atproto") else {
            throw .invalidParams(ClientIdentityError.scopeLacksAtproto(scope).description, field: "scope")
        }
        if let extra = OAuthScope.tokens(scope).first(where: { !declared.contains($0) }) {
            throw .invalidParams("the scope \(extra) is not in the client metadata's scope (oauth_scope = \"\(settings.scope)\")",
                                 field: "scope")
        }
        let redirectURI = Self.redirect(redirect, port: listenerPort)
        guard settings.authentication == .privateKeyJWT else {
            return LoginClient(clientID: clientID, redirectURI: redirectURI, scope: scope,
                               authentication: .none(clientID: clientID), kind: .hostedPublic, keyID: nil)
        }
        // Chosen and reserved at once, so that a rotation cannot drop it in between.
        let chosen = keys.withLock { keys -> ClientSigningKey? in
            guard let key = keys.all.last else { return nil }
            keys.reserved[key.keyID, default: 0] += 1
            return key
        }
        guard let key = chosen else {
            throw .internalError("the confidential client has no signing key")
        }
        return LoginClient(clientID: clientID, redirectURI: redirectURI, scope: scope,
                           authentication: .privateKeyJWT(clientID: clientID, key: key), kind: .confidential, keyID: key.keyID)
    }

    /// How a stored session authenticates: as the client it logged in with, and for a
    /// confidential one with the key it is bound to; nil when that key is gone (the session
    /// cannot authenticate any more).
    func authentication(for info: OAuthSessionInfo) -> ClientAuthentication? {
        guard info.clientKind == .confidential else { return .none(clientID: info.clientID) }
        guard let keyID = info.clientKeyID, let key = keys.withLock({ $0.all.first { $0.keyID == keyID } }) else { return nil }
        return .privateKeyJWT(clientID: info.clientID, key: key)
    }

    /// Every signing key, oldest first.
    var signingKeys: [ClientSigningKey] { keys.withLock { $0.all } }

    /// Ends the reservation a login's `loginClient` made (the login ended, either way).
    func release(_ keyID: String?) {
        guard let keyID else { return }
        keys.withLock { keys in
            keys.reserved[keyID, default: 1] -= 1
            if keys.reserved[keyID] == 0 { keys.reserved[keyID] = nil }
        }
    }

    func addKey(_ key: ClientSigningKey) { keys.withLock { $0.all.append(key) } }

    /// Whether a login in progress started with the key (it must be kept).
    func isReserved(_ keyID: String) -> Bool { keys.withLock { $0.reserved[keyID] != nil } }

    /// Forgets a key (the store no longer holds it).
    func forgetKey(_ keyID: String) { keys.withLock { $0.all.removeAll { $0.keyID == keyID } } }

    /// The document to publish at `oauth_client_id`; nil for the loopback client, which has none.
    /// A confidential client lists every key still held, so sessions bound to older keys can
    /// still authenticate.
    func metadataDocument() throws(ClientIdentityError) -> ClientMetadataDocument? {
        guard let clientID = settings.clientID, let redirect = settings.redirectURI else { return nil }
        switch settings.authentication {
        case .none:
            return try ClientMetadataDocument.publicClient(
                clientID: clientID, redirectURIs: [redirect], scope: settings.scope,
                applicationType: settings.receivesRedirect ? "native" : "web", clientName: settings.clientName,
                clientURI: settings.clientURI)
        case .privateKeyJWT:
            return try ClientMetadataDocument.confidentialClient(
                clientID: clientID, redirectURIs: [redirect], scope: settings.scope, keys: signingKeys,
                clientName: settings.clientName, clientURI: settings.clientURI)
        }
    }

    /// The configured loopback redirect with the listener's port when it named none.
    static func redirect(_ configured: String, port: Int?) -> String {
        guard let port, var parts = URLComponents(string: configured), parts.port == nil,
              OAuthClientSettings.loopbackRedirect(configured) != nil else { return configured }
        parts.port = port
        return parts.string ?? configured
    }
}
