import AccountStoreCore
import Crypto
import Foundation
import GRDB
import Testing

@Suite("Secrets at rest and durability")
struct SecretSealingTests {
    @Test("a sealed secret copied into another account's row does not open")
    func movedSecretFails() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let store = try Fixtures.openStore(in: directory.url, key: SymmetricKey(size: .bits256))
        let victim = Fixtures.record()
        let attacker = Fixtures.record()
        try await store.insert(victim, secrets: Fixtures.secrets())
        try await store.insert(attacker, secrets: Fixtures.secrets())

        // Someone with write access to the file swaps the blobs with plain SQL.
        let raw = try DatabaseQueue(path: store.databasePath)
        try await raw.write { db in
            try db.execute(
                sql: "UPDATE account SET sealed_secrets = (SELECT sealed_secrets FROM account WHERE id = ?) WHERE id = ?",
                arguments: [victim.id, attacker.id])
        }
        try raw.close()

        let error = await #expect(throws: StoreError.self) { try await store.secrets(for: attacker.id) }
        #expect(error == .secretDoesNotOpen(account: attacker.id))
        #expect(error?.description.contains(attacker.id.uuidString.lowercased()) == true)
        // The untouched account still opens.
        await #expect(throws: Never.self) { try await store.secrets(for: victim.id) }
    }

    @Test("secrets do not open with another key")
    func wrongKeyFails() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let record = Fixtures.record()
        do {
            let store = try Fixtures.openStore(in: directory.url, key: SymmetricKey(size: .bits256))
            try await store.insert(record, secrets: Fixtures.secrets())
            await store.close()
        }
        let reopened = try Fixtures.openStore(in: directory.url, key: SymmetricKey(size: .bits256))
        // The daemon's start-up check finds the wrong key before anything is read...
        await #expect(throws: StoreError.secretDoesNotOpen(account: record.id)) { try await reopened.verifyKey() }
        // ...and nothing read under it is trusted: the metadata seal fails too, no secret opens.
        #expect(try await reopened.account(id: record.id)?.isAltered == true)
        await #expect(throws: StoreError.recordAltered(account: record.id)) {
            try await reopened.secrets(for: record.id)
        }
    }

    @Test("no token appears in the database or WAL file bytes")
    func tokensAreNotInPlainText() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let store = try Fixtures.openStore(in: directory.url, key: SymmetricKey(size: .bits256))
        let record = Fixtures.record()
        let original = Fixtures.secrets()
        let rotated = Fixtures.secrets()
        try await store.insert(record, secrets: original)
        try await store.saveRefreshedSession(
            id: record.id, secrets: rotated, accessExpiresAt: nil, refreshExpiresAt: nil, at: Date())

        var fileBytes = Data()
        for suffix in ["", "-wal", "-shm"] {
            if let data = FileManager.default.contents(atPath: store.databasePath + suffix) {
                fileBytes.append(data)
            }
        }
        // The search sees the rows (their DID is there in clear)...
        #expect(fileBytes.contains(record.did))
        // ...but no token, old or new.
        for token in [original.accessToken, original.refreshToken, rotated.accessToken, rotated.refreshToken] {
            #expect(!fileBytes.contains(token))
        }
    }

    @Test("the writer commits with synchronous = FULL")
    func writerIsFullySynchronous() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let store = try Fixtures.openStore(in: directory.url, key: SymmetricKey(size: .bits256))
        #expect(try await store.writerSynchronousMode() == 2)
        // Still FULL after writes went through the same writer connection.
        try await store.insert(Fixtures.record(), secrets: Fixtures.secrets())
        #expect(try await store.writerSynchronousMode() == 2)
    }

    @Test("the store directory is 0700 and the database files 0600")
    func filePermissions() async throws {
        let parent = try TemporaryDirectory()
        defer { parent.remove() }
        let directory = parent.appending("state/blueskyd")
        let store = try Fixtures.openStore(in: directory, key: SymmetricKey(size: .bits256))
        try await store.insert(Fixtures.record(), secrets: Fixtures.secrets())

        #expect(try Fixtures.permissions(of: directory.path) == 0o700)
        #expect(try Fixtures.permissions(of: store.databasePath) == 0o600)
        #expect(try Fixtures.permissions(of: store.databasePath + "-wal") == 0o600)
        #expect(try Fixtures.permissions(of: store.databasePath + "-shm") == 0o600)
    }
}
