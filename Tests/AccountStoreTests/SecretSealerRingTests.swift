import AccountStoreCore
import Crypto
import Foundation
import Testing

/// The sealer as a key ring, for a rekey while hosts run (docs/design/rekey.md): a host holding
/// the old and the new key opens rows under either, and seals only with the one it writes with.
@Suite("A key ring: open under either key, seal under one")
struct SecretSealerRingTests {
    static let (old, new, stranger) = (SymmetricKey(size: .bits256), SymmetricKey(size: .bits256), SymmetricKey(size: .bits256))
    static let secrets = AccountSecrets(accessToken: "access", refreshToken: "refresh")
    static let record = AccountRecord(did: "did:plc:ring", pds: "https://pds.example.test", authKind: .appPassword)

    @Test("a row sealed under the old key opens in a ring that writes with the new one; what the ring seals, only the new key opens")
    func opensEitherSealsOne() throws {
        let account = Self.record.id
        let underOld = try SecretSealer(key: Self.old).seal(Self.secrets, account: account)
        let ring = SecretSealer(sealingWith: Self.new, alsoOpening: [Self.old])
        #expect(try ring.open(underOld, account: account) == Self.secrets)
        #expect(ring.sealingKey(of: underOld, account: account) == StoreKey.keyFingerprint(Self.old))

        let resealed = try ring.seal(Self.secrets, account: account)
        #expect(ring.sealingKey(of: resealed, account: account) == StoreKey.keyFingerprint(Self.new))
        #expect(try SecretSealer(key: Self.new).open(resealed, account: account) == Self.secrets)
        #expect(throws: StoreError.secretDoesNotOpen(account: account)) { try SecretSealer(key: Self.old).open(resealed, account: account) }
    }

    @Test("a row sealed by a key the ring lacks does not open, and names no key")
    func strangerKey() throws {
        let account = Self.record.id
        let blob = try SecretSealer(key: Self.stranger).seal(Self.secrets, account: account)
        let ring = SecretSealer(sealingWith: Self.new, alsoOpening: [Self.old])
        #expect(throws: StoreError.secretDoesNotOpen(account: account)) { try ring.open(blob, account: account) }
        #expect(ring.sealingKey(of: blob, account: account) == nil)
    }

    @Test("a metadata seal holds under either key of the ring, and a changed row breaks it under both")
    func metadataSeals() {
        let seal = SecretSealer(key: Self.old).metadataSeal(Self.record, tenant: "alice")
        let ring = SecretSealer(sealingWith: Self.new, alsoOpening: [Self.old])
        #expect(ring.check(Self.record, tenant: "alice", seal: seal) == .holds)
        #expect(ring.check(Self.record, tenant: "bob", seal: seal) == .broken)
        var moved = Self.record
        moved.pds = "https://evil.example.test"
        #expect(ring.check(moved, tenant: "alice", seal: seal) == .broken)
        #expect(SecretSealer(key: Self.stranger).check(Self.record, tenant: "alice", seal: seal) == .broken)
        // What the ring seals holds for a host with the new key only.
        let fresh = ring.metadataSeal(Self.record, tenant: "alice")
        #expect(SecretSealer(key: Self.new).check(Self.record, tenant: "alice", seal: fresh) == .holds)
        #expect(SecretSealer(key: Self.old).check(Self.record, tenant: "alice", seal: fresh) == .broken)
    }

    @Test("a rekey's reseal keeps each blob's format version and each seal's, and makes nothing of a value no key opens or a broken seal")
    func resealKeepsVersions() throws {
        let account = Self.record.id
        let ring = SecretSealer(sealingWith: Self.new, alsoOpening: [Self.old])
        let current = try SecretSealer(key: Self.old).seal(Self.secrets, account: account)
        let resealed = try #require(ring.resealed(current, account: account))
        #expect(resealed.first == current.first && ring.sealingKey(of: resealed, account: account) == StoreKey.keyFingerprint(Self.new))
        #expect(SecretSealer(key: Self.new).wasSealedWithMetadata(resealed, account: account))
        // A version 1 blob (a row from before metadata seals) stays version 1: as version 2 it
        // would claim a seal its row never had.
        let plaintext = try JSONEncoder().encode(Self.secrets)
        let legacyData = SecretSealer.additionalData(for: account, label: SecretSealer.legacyPurposeLabel)
        var legacy = Data([SecretSealer.legacyFormatVersion])
        legacy.append(try AES.GCM.seal(plaintext, using: Self.old, authenticating: legacyData).combined!)
        let legacyResealed = try #require(ring.resealed(legacy, account: account))
        #expect(legacyResealed.first == SecretSealer.legacyFormatVersion)
        #expect(try SecretSealer(key: Self.new).open(legacyResealed, account: account) == Self.secrets)
        #expect(!SecretSealer(key: Self.new).wasSealedWithMetadata(legacyResealed, account: account))
        // Nothing to reseal: a stranger's blob, a broken seal, no seal.
        #expect(ring.resealed(try SecretSealer(key: Self.stranger).seal(Self.secrets, account: account), account: account) == nil)
        let seal = SecretSealer(key: Self.old).metadataSeal(Self.record, tenant: "alice")
        let newSeal = try #require(ring.resealedMetadataSeal(seal, record: Self.record, tenant: "alice"))
        #expect(SecretSealer(key: Self.new).check(Self.record, tenant: "alice", seal: newSeal) == .holds)
        #expect(ring.resealedMetadataSeal(seal, record: Self.record, tenant: "bob") == nil)
        #expect(ring.resealedMetadataSeal(nil, record: Self.record, tenant: "alice") == nil)
    }
}
