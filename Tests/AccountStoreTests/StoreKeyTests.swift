import AccountStoreCore
import Crypto
import Foundation
import Testing

@Suite("Store key")
struct StoreKeyTests {
    @Test("the key file is created 0600 with 32 bytes on first start, then reused")
    func keyFileCreatedAndReused() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let keyFile = directory.appending("state/store.key")

        let created = try StoreKey.load(keyFile: keyFile, environment: [:])
        #expect(try Fixtures.permissions(of: keyFile.path) == 0o600)
        #expect(FileManager.default.contents(atPath: keyFile.path) == Fixtures.bytes(of: created))
        #expect(created.bitCount == 256)

        let reused = try StoreKey.load(keyFile: keyFile, environment: [:])
        #expect(Fixtures.bytes(of: reused) == Fixtures.bytes(of: created))
        #expect(StoreKey.keyFingerprint(reused) == StoreKey.keyFingerprint(created))
    }

    @Test("loaders racing on a missing key file all get the same key")
    func racingCreationAgrees() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let keyFile = directory.appending("store.key")
        let results = LockedResults()
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            results.append(Result { Fixtures.bytes(of: try StoreKey.load(keyFile: keyFile, environment: [:])) })
        }
        let keys = try results.values.map { try $0.get() }
        #expect(keys.count == 8)
        #expect(Set(keys).count == 1)
        // No temporary files are left behind.
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path) == ["store.key"])
    }

    @Test("a key file readable by group or others is refused")
    func groupReadableKeyRefused() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let keyFile = directory.appending("store.key")
        _ = try StoreKey.load(keyFile: keyFile, environment: [:])
        try FileManager.default.setAttributes([.posixPermissions: 0o640], ofItemAtPath: keyFile.path)

        let error = await #expect(throws: StoreError.self) { try StoreKey.load(keyFile: keyFile, environment: [:]) }
        #expect(error == .keyFileInsecure(path: keyFile.path, mode: 0o640))
        #expect(error?.description.contains("chmod 600") == true)
        #expect(error?.description.contains(keyFile.path) == true)
    }

    @Test("a systemd credential is accepted raw, hex or base64", arguments: ["raw", "hex", "base64"])
    func credentialEncodings(encoding: String) async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let expected = Data((0..<32).map { _ in UInt8.random(in: 0...255) })
        let content: Data
        switch encoding {
        case "raw": content = expected
        case "hex": content = Data((expected.map { String(format: "%02x", $0) }.joined() + "\n").utf8)
        default: content = Data((expected.base64EncodedString() + "\n").utf8)
        }
        let credentials = directory.appending("credentials")
        try FileManager.default.createDirectory(at: credentials, withIntermediateDirectories: true)
        try content.write(to: credentials.appendingPathComponent("blueskyd-store-key"))
        let keyFile = directory.appending("store.key")

        let key = try StoreKey.load(keyFile: keyFile, environment: ["CREDENTIALS_DIRECTORY": credentials.path])
        #expect(Fixtures.bytes(of: key) == expected)
        #expect(!FileManager.default.fileExists(atPath: keyFile.path), "the credential wins: no key file is created")
    }

    @Test("a malformed credential is refused with its path")
    func badCredentialRefused() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let credential = directory.appending("blueskyd-store-key")
        try Data("not a key at all".utf8).write(to: credential)

        let error = await #expect(throws: StoreError.self) {
            try StoreKey.load(keyFile: directory.appending("store.key"), environment: ["CREDENTIALS_DIRECTORY": directory.path])
        }
        guard case .keyInvalid(let path, _) = error else {
            Issue.record("expected keyInvalid, got \(String(describing: error))")
            return
        }
        #expect(path == credential.path)
        // 31 bytes, or hex of the wrong length, are refused too.
        for bad in [Data(repeating: 7, count: 31), Data(String(repeating: "ab", count: 31).utf8)] {
            try bad.write(to: credential)
            await #expect(throws: StoreError.self) {
                try StoreKey.load(keyFile: directory.appending("store.key"), environment: ["CREDENTIALS_DIRECTORY": directory.path])
            }
        }
    }

    @Test("without the credential file the key file is used")
    func missingCredentialFallsBack() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let keyFile = directory.appending("store.key")
        let fromFile = try StoreKey.load(keyFile: keyFile, environment: [:])
        let loaded = try StoreKey.load(keyFile: keyFile, environment: ["CREDENTIALS_DIRECTORY": directory.appending("empty").path])
        #expect(Fixtures.bytes(of: loaded) == Fixtures.bytes(of: fromFile))
    }

    @Test("the fingerprint is short hex and differs between keys")
    func fingerprint() {
        let first = StoreKey.keyFingerprint(SymmetricKey(size: .bits256))
        let second = StoreKey.keyFingerprint(SymmetricKey(size: .bits256))
        #expect(first.count == 16)
        #expect(first.allSatisfy { $0.isHexDigit })
        #expect(first != second)
    }
}

/// Collects results from concurrent closures.
final class LockedResults: @unchecked Sendable {
    private let lock = NSLock()
    private var storage: [Result<Data, any Error>] = []

    func append(_ result: Result<Data, any Error>) {
        lock.withLock { storage.append(result) }
    }

    var values: [Result<Data, any Error>] {
        lock.withLock { storage }
    }
}
