import Foundation
import Synchronization

/// One account: fixed credentials and identity, plus mutable sessions, repo and counters behind
/// its own lock (held only for in-memory work, never across I/O).
final class AccountState: Sendable {
    let did: String
    let name: String
    let password: String
    let appPassword: String
    let authFactorToken: String
    let requiresAuthFactor: Bool
    let publishWellKnown: Bool
    let didMethod: DIDMethod
    let accessTokenLifetime: Duration?
    let publicKeyMultibase: String
    let data: Mutex<AccountData>

    init(did: String, handle: String, spec: AccountSpec) {
        self.did = did
        name = spec.name
        password = spec.password
        appPassword = spec.appPassword
        authFactorToken = Self.makeSignInCode()
        requiresAuthFactor = spec.requiresAuthFactor
        publishWellKnown = spec.publishWellKnown
        didMethod = spec.didMethod
        accessTokenLifetime = spec.accessTokenLifetime
        publicKeyMultibase = Identifiers.randomMultikey()
        data = Mutex(AccountData(handle: handle, documentHandle: spec.documentHandle?.lowercased()))
    }

    /// Codes look like the reference PDS's emailed ones: `XXXXX-XXXXX`.
    private static func makeSignInCode() -> String {
        let alphabet = Array("ABCDEFGHJKLMNPQRSTUVWXYZ23456789")
        let characters = (0..<10).map { _ in alphabet.randomElement()! }
        return String(characters[0..<5]) + "-" + String(characters[5...])
    }

    var handle: String { data.withLock { $0.handle } }

    var stats: AccountStats { data.withLock { $0.stats } }

    func testAccount() -> TestAccount {
        TestAccount(
            did: did, handle: handle, password: password, appPassword: appPassword,
            authFactorToken: authFactorToken)
    }
}

/// The mutable part of an account.
struct AccountData {
    var handle: String
    /// The handle the DID document claims, when a test wants it to differ from `handle`.
    var documentHandle: String?
    var stats = AccountStats()
    var sessions: [String: SessionRecord] = [:]
    var refreshTokens: [String: RefreshTokenRecord] = [:]
    /// Access token id → session id, so revoking a session also stops its access tokens.
    var accessTokens: [String: String] = [:]
    var collections: [String: RecordCollection] = [:]
    var blobs: [String: BlobRecord] = [:]
}

struct SessionRecord {
    let id: String
    let accessScope: String
    var revoked = false
}

struct RefreshTokenRecord {
    let sessionID: String
    /// Set once the token has been exchanged: the answer a retry within the grace period gets.
    var successor: IssuedTokens?
    var rotatedAt: Double?
}

struct BlobRecord {
    let cid: String
    let mimeType: String
    let size: Int
    /// The bytes, served back by `com.atproto.sync.getBlob`.
    let bytes: [UInt8]
}

/// The DID → account and handle → DID maps.
final class AccountDirectory: Sendable {
    private struct Maps {
        var byDID: [String: AccountState] = [:]
        var didByHandle: [String: String] = [:]
        var creationOrder: [String] = []
    }

    private let maps = Mutex(Maps())

    func add(_ account: AccountState) {
        let handle = account.handle
        maps.withLock {
            $0.byDID[account.did] = account
            $0.didByHandle[handle] = account.did
            $0.creationOrder.append(account.did)
        }
    }

    func account(did: String) -> AccountState? {
        maps.withLock { $0.byDID[did] }
    }

    func account(handle: String) -> AccountState? {
        maps.withLock { maps in maps.didByHandle[handle.lowercased()].flatMap { maps.byDID[$0] } }
    }

    /// A handle or a DID, as XRPC `repo`/`actor`/`identifier` parameters accept.
    func account(identifier: String) -> AccountState? {
        identifier.hasPrefix("did:") ? account(did: identifier) : account(handle: identifier)
    }

    var all: [AccountState] {
        maps.withLock { maps in maps.creationOrder.compactMap { maps.byDID[$0] } }
    }

    func changeHandle(did: String, to newHandle: String) {
        let newHandle = newHandle.lowercased()
        guard let account = account(did: did) else { return }
        let oldHandle = account.data.withLock { data in
            defer {
                data.handle = newHandle
                data.documentHandle = nil
            }
            return data.handle
        }
        maps.withLock {
            if $0.didByHandle[oldHandle] == did { $0.didByHandle[oldHandle] = nil }
            $0.didByHandle[newHandle] = did
        }
    }
}
