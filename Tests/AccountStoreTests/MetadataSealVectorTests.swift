import AccountStoreCore
import Crypto
import Foundation
import Testing

/// The metadata seal's bytes, fixed: every row a store holds was sealed this way, so a faster
/// way of computing it must give the same bytes. The expected values were computed apart from
/// blueskyd (Python's hmac and hashlib: HKDF-SHA256 of the key with no salt, then HMAC-SHA256
/// over the length-prefixed fields `SecretSealer` documents).
@Suite("Metadata seals: known answers")
struct MetadataSealVectorTests {
    static let key = SymmetricKey(data: Data(1...32))
    static let record = AccountRecord(
        id: UUID(uuidString: "6F9619FF-8B86-D011-B42D-00C04FC964FF")!, did: "did:plc:ewvi7nxzyoun6zhxrhs64oiz",
        handle: "alice.example.test", handleVerified: true, pds: "https://pds.example.test", authKind: .appPassword)
    static let version2 = "020cc5990c27c4de34e43ca8f88003f79833647c07edfec0bba3986502fcdd09d2"
    static let version1 = "333c7c36a9073b6cc5296b3ba15e59c1c3b758c124a9be41428cbfcfa8a34f7a"

    static func bytes(_ hex: String) -> Data {
        var data = Data()
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2)
            data.append(UInt8(hex[index..<next], radix: 16)!)
            index = next
        }
        return data
    }

    @Test("a seal is the known bytes, and holds")
    func sealIsKnown() {
        let sealer = SecretSealer(key: Self.key)
        #expect(sealer.metadataSeal(Self.record, tenant: "alice") == Self.bytes(Self.version2))
        #expect(sealer.check(Self.record, tenant: "alice", seal: Self.bytes(Self.version2)) == .holds)
    }

    @Test("an older blueskyd's seal (routing fields only) is known as one; a changed field or tenant breaks either")
    func olderAndBroken() {
        let sealer = SecretSealer(key: Self.key)
        #expect(sealer.check(Self.record, tenant: "alice", seal: Self.bytes(Self.version1)) == .olderVersion)
        var moved = Self.record
        moved.pds = "https://elsewhere.example.test"
        #expect(sealer.check(moved, tenant: "alice", seal: Self.bytes(Self.version2)) == .broken)
        #expect(sealer.check(moved, tenant: "alice", seal: Self.bytes(Self.version1)) == .broken)
        #expect(sealer.check(Self.record, tenant: "bob", seal: Self.bytes(Self.version2)) == .broken)
        var renamed = Self.record
        renamed.handle = "mallory.example.test"
        #expect(sealer.check(renamed, tenant: "alice", seal: Self.bytes(Self.version2)) == .broken)
        #expect(sealer.check(Self.record, tenant: "alice", seal: nil) == .missing)
    }
}
