import AccountStoreCore
import BlueskyTesting
import Crypto
import Foundation
import Logging
import PostgresStore
import SQLiteStore
import Testing

/// `blueskyd store copy`'s stores: a registry moves from SQLite to a PostgreSQL tenant and back
/// with every session as it was, into an empty target only, and whole or not at all.
@Suite("Copying a registry between stores", .timeLimit(.minutes(2)))
struct RegistryCopyTests {
    struct Failed: Error {}

    /// Three accounts of every kind, one the default, one with a refresh left unfinished (its
    /// write-ahead mark), one with a profile; a client key and a nonce.
    static func seed(_ store: any AccountStore) async throws -> [UUID] {
        var app = Fixtures.record()
        app.profile = AccountProfile(displayName: "Alice", avatar: nil, description: "hi", fetchedAt: Date())
        var oauth = Fixtures.record(isDefault: true)
        oauth.authKind = .oauth
        oauth.oauth = OAuthSessionInfo(
            issuer: "https://auth.example.test", tokenEndpoint: "https://auth.example.test/oauth/token",
            revocationEndpoint: nil, scope: "atproto transition:generic", sessionStartedAt: Date(), clientKind: .confidential,
            clientID: "https://app.example.test/client-metadata.json", clientKeyID: "key-1")
        var other = Fixtures.record(did: "https://mastodon.example.test#109")
        other.authKind = .oauth2
        other.oauth = OAuthSessionInfo(
            issuer: "https://mastodon.example.test", tokenEndpoint: "https://mastodon.example.test/oauth/token",
            revocationEndpoint: "https://mastodon.example.test/oauth/revoke", scope: "read", sessionStartedAt: Date(),
            clientKind: .oauth2, clientID: "app-1", clientKeyID: nil)
        try await store.addClientKey(StoredClientKey(keyID: "key-1", privateKey: Data(repeating: 7, count: 32), createdAt: Date()))
        try await store.insert(app, secrets: Fixtures.secrets())
        var dpop = Fixtures.secrets()
        dpop.dpopPrivateKey = Data(repeating: 9, count: 32)
        try await store.insert(oauth, secrets: dpop)
        var registered = Fixtures.secrets()
        registered.oauth2 = OAuth2SessionFacts(clientSecret: "client-secret", redirectURI: "http://127.0.0.1:8123/callback",
                                               profileURL: "https://mastodon.example.test/api/v1/accounts/verify_credentials",
                                               profileFields: ["subject": "id"])
        try await store.insert(other, secrets: registered)
        try await store.saveDPoPNonces([StoredDPoPNonce(account: oauth.id, origin: "https://pds.example.test", nonce: "n-1",
                                                        receivedAt: Date())])
        // A refresh that never ended: its mark goes with the account.
        #expect(try await store.claimRefresh(id: app.id, expecting: 1, at: Date()) == .granted(interruptedAt: nil))
        return [app.id, oauth.id, other.id]
    }

    /// Everything a session needs, as `store` holds it.
    static func contents(_ store: any AccountStore) async throws -> [String] {
        var lines: [String] = []
        for account in try await store.portableAccounts(after: nil, limit: 100) {
            lines.append("\(account.record) \(account.secrets.accessToken) \(account.secrets.refreshToken) "
                         + "\(account.secrets.dpopPrivateKey?.base64EncodedString() ?? "-") \(account.secrets.oauth2?.clientSecret ?? "-")")
        }
        lines += try await store.allDPoPNonces().map { "\($0)" }
        lines += try await store.clientKeys().map { "\($0.keyID) \($0.privateKey.base64EncodedString()) \($0.createdAt)" }
        return lines
    }

    @Test("""
        SQLite to a PostgreSQL tenant and back to a new SQLite store (another key): every account, secret, mark, default, \
        profile, nonce and client key as it was; the tenant's rows seal under the tenant
        """)
    func roundTrip() async throws {
        let source = try await StoreBackend.sqlite.open()
        let ids = try await Self.seed(source.store)
        let expected = try await Self.contents(source.store)
        #expect(try await source.store.account(id: ids[0])?.refreshStartedAt != nil, "the mark is there to be copied")

        let tenant = SharedTestDatabase.freshTenant()
        let shared = try await SharedTestDatabase.openStore(tenant: tenant, key: SymmetricKey(size: .bits256))
        let extras = try await source.store.registryExtras()
        try await shared.importRegistry(extras: extras) { writer throws(StoreError) in
            #expect(try await RegistryCopy.copyAccounts(from: source.store, into: writer) == 3)
        }
        #expect(try await Self.contents(shared) == expected)
        #expect(try await shared.unsealedAccounts().isEmpty, "sealed under the tenant and its key")

        let back = try TemporaryDirectory()
        defer { back.remove() }
        let backKey = SymmetricKey(size: .bits256)
        let fromShared = try await shared.registryExtras()
        let path = try await SQLiteAccountStore.importRegistry(into: back.url, key: backKey, logger: Fixtures.logger,
                                                               extras: fromShared) { writer throws(StoreError) in
            _ = try await RegistryCopy.copyAccounts(from: shared, into: writer)
        }
        #expect(path.hasPrefix(back.url.path))
        let reopened = try Fixtures.openStore(in: back.url, key: backKey)
        #expect(try await Self.contents(reopened) == expected)
        try await reopened.verifyKey()
        #expect(try FileManager.default.contentsOfDirectory(atPath: back.url.path).allSatisfy { !$0.hasPrefix(".copy-") })
        await reopened.close()
        await shared.close()
        await source.close()
    }

    @Test("""
        into an empty store that was used (read and written, its log beside it): the copy replaces it whole, and no frame \
        of the old log is read into it; a log left beside a removed store is refused
        """)
    func intoAnEmptyUsedStore() async throws {
        let source = try await StoreBackend.sqlite.open()
        _ = try await Self.seed(source.store)
        let expected = try await Self.contents(source.store)
        let extras = try await source.store.registryExtras()
        let key = SymmetricKey(size: .bits256)
        let target = try await StoreBackend.sqlite.open(key: key)
        let directory = try #require(target.directory)
        // Used: an account added and removed, reads on its readers.
        let passing = Fixtures.record()
        try await target.store.insert(passing, secrets: Fixtures.secrets())
        _ = try await target.store.accounts(after: nil, limit: 10)
        try await target.store.delete(id: passing.id)
        try await Self.copy(from: source.store, extras: extras, into: target, key: key)
        let after = try await StoreBackend.sqlite.open(key: key, reuse: target)
        #expect(try await Self.contents(after.store) == expected)
        await after.store.close()

        // The store removed, a log with frames left beside it: refused, nothing written.
        let database = directory.url.appendingPathComponent("accounts.sqlite").path
        unlink(database)
        try Data(repeating: 1, count: 4096).write(to: URL(fileURLWithPath: database + "-wal"))
        await #expect(throws: StoreError.self) {
            try await SQLiteAccountStore.importRegistry(into: directory.url, key: key, logger: Fixtures.logger, extras: extras) {
                writer throws(StoreError) in _ = try await RegistryCopy.copyAccounts(from: source.store, into: writer)
            }
        }
        #expect(!FileManager.default.fileExists(atPath: database))
        directory.remove()
        await source.close()
    }

    @Test("a target that holds an account or a client key is refused, and keeps what it held")
    func targetMustBeEmpty() async throws {
        let source = try await StoreBackend.sqlite.open()
        _ = try await Self.seed(source.store)
        let extras = try await source.store.registryExtras()
        for backend in [StoreBackend.sqlite, .postgresql] {
            let key = SymmetricKey(size: .bits256)
            let target = try await backend.open(key: key)
            try await target.store.insert(Fixtures.record(), secrets: Fixtures.secrets())
            let before = try await Self.contents(target.store)
            await #expect(throws: StoreError.self, "\(backend)") {
                try await Self.copy(from: source.store, extras: extras, into: target, key: key)
            }
            if backend == .postgresql { await target.store.close() }  // a state directory's was closed for the copy
            let after = try await backend.open(key: key, reuse: target)
            #expect(try await Self.contents(after.store) == before, "\(backend)")
            await after.close()
        }
        await source.close()
    }

    @Test("""
        a copy that fails half way (after its first batch) leaves no trace: no row in the tenant, no file in the state \
        directory; a source row whose seal fails is never read for a copy
        """)
    func failedCopyLeavesNothing() async throws {
        let source = try await StoreBackend.sqlite.open()
        for _ in 0..<(RegistryCopy.pageSize + 10) { try await source.store.insert(Fixtures.record(), secrets: Fixtures.secrets()) }
        let extras = try await source.store.registryExtras()
        let failing: @Sendable (any RegistryWriter) async throws(StoreError) -> Void = { writer throws(StoreError) in
            try await writer.write(try await source.store.portableAccounts(after: nil, limit: 10))
            throw StoreError.database(context: "copying", reason: "the source went away")
        }
        let tenant = SharedTestDatabase.freshTenant()
        let shared = try await SharedTestDatabase.openStore(tenant: tenant, key: SymmetricKey(size: .bits256))
        await #expect(throws: StoreError.self) { try await shared.importRegistry(extras: extras, failing) }
        #expect(try await shared.count() == 0)
        await shared.close()

        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        await #expect(throws: StoreError.self) {
            try await SQLiteAccountStore.importRegistry(into: directory.url, key: SymmetricKey(size: .bits256),
                                                        logger: Fixtures.logger, extras: extras, failing)
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.url.path).isEmpty)

        let victim = try #require(try await source.store.accounts(after: nil, limit: 1).first)
        try await TenancyTests.rewrite(source, "UPDATE account SET pds = 'https://pds.intruder.test' WHERE did = '\(victim.did)'")
        await #expect(throws: StoreError.recordAltered(account: victim.id)) {
            try await source.store.portableAccounts(after: nil, limit: 10)
        }
        #expect(try await RegistryCopy.survey(source.store).altered.map(\.id) == [victim.id])
        await source.close()
    }

    /// Copies into `target` as `blueskyd store copy` does: a tenant's transaction, or a state
    /// directory's store (closed first, as the copy holds its lock) built aside.
    static func copy(from source: any AccountStore, extras: RegistryExtras, into target: OpenedStore, key: SymmetricKey) async throws {
        let produce: @Sendable (any RegistryWriter) async throws(StoreError) -> Void = { writer throws(StoreError) in
            _ = try await RegistryCopy.copyAccounts(from: source, into: writer)
        }
        if let shared = target.store as? PostgresAccountStore {
            try await shared.importRegistry(extras: extras, produce)
        } else if let directory = target.directory {
            await target.store.close()
            _ = try await SQLiteAccountStore.importRegistry(into: directory.url, key: key, logger: Fixtures.logger,
                                                            extras: extras, produce)
        }
    }
}
