import ATOAuth
import AccountStoreCore
import Crypto
import DPoP
import Foundation
import Logging

/// The confidential client's signing keys: created by blueskyd, sealed in the store, rotated on
/// request. Their private parts never leave the daemon; only the JWKS is shown.
extension OAuthClientIdentity {
    /// The identity for `settings`, with every stored key. A confidential client without a key
    /// gets its first one now, so its JWKS can be published before the first login.
    static func load(settings: OAuthClientSettings, store: any AccountStore, now: Date, logger: Logger) async throws -> OAuthClientIdentity {
        var keys = try await store.clientKeys().map { stored in
            do {
                return try ClientSigningKey(keyID: stored.keyID, rawRepresentation: stored.privateKey)
            } catch {
                throw StoreError.clientKeyDoesNotOpen(keyID: stored.keyID)
            }
        }
        if settings.authentication == .privateKeyJWT && keys.isEmpty {
            let key = try await createKey(store: store, now: now)
            logger.notice("created the OAuth client's signing key; publish the client metadata again (bskyctl client-metadata)",
                          metadata: ["kid": "\(key.keyID)"])
            keys.append(key)
        }
        return OAuthClientIdentity(settings: settings, keys: keys)
    }

    /// A new ES256 key, stored before it is used. Its `kid` is derived from its thumbprint, so
    /// two keys never share one.
    static func createKey(store: any AccountStore, now: Date) async throws -> ClientSigningKey {
        let privateKey = P256.Signing.PrivateKey()
        let thumbprint = PublicJWK(publicKey: privateKey.publicKey).thumbprint
        let key = ClientSigningKey(keyID: "blueskyd-" + thumbprint.prefix(16), privateKey: privateKey)
        try await store.addClientKey(StoredClientKey(keyID: key.keyID, privateKey: privateKey.rawRepresentation, createdAt: now))
        return key
    }

    /// Adds a new key that signs new logins from now on, then drops the older keys that no
    /// session is bound to and no login in progress started with. Returns the new key's id and
    /// the ids dropped.
    func rotateKey(store: any AccountStore, now: Date) async throws(DaemonError) -> (added: String, removed: [String]) {
        guard settings.authentication == .privateKeyJWT else { throw .notConfidentialClient }
        await rotation.lock()
        defer { rotation.unlock() }
        do {
            let key = try await Self.createKey(store: store, now: now)
            addKey(key)
            // From here on logins reserve the new key only: an older key found unreserved stays so.
            var removed: [String] = []
            for old in signingKeys where old.keyID != key.keyID && !isReserved(old.keyID) {
                if try await store.removeClientKey(old.keyID) {
                    forgetKey(old.keyID)
                    removed.append(old.keyID)
                }
            }
            return (key.keyID, removed)
        } catch {
            throw .internalError("cannot rotate the client key: \(error)")
        }
    }
}
