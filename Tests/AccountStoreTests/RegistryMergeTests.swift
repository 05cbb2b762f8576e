import AccountStoreCore
import Foundation
import Testing

/// Which side's row each account keeps when a registry is merged into a store in use.
@Suite("Merging a registry: each account keeps its newer session")
struct RegistryMergeTests {
    static let login = Date(timeIntervalSince1970: 1_800_000_000)

    static func record(_ did: String, refreshed: TimeInterval?, isDefault: Bool = false, id: UUID = UUID()) -> AccountRecord {
        AccountRecord(id: id, did: did, pds: "https://pds.example.test", authKind: .appPassword, isDefault: isDefault,
                      createdAt: login, lastRefreshAt: refreshed.map { login.addingTimeInterval($0) })
    }

    @Test("the newer session wins, a tie keeps the target's, an account only in the source is added, one only in the target kept")
    func decisions() {
        let (newerHere, olderHere, same, onlyHere) = (UUID(), UUID(), UUID(), UUID())
        let merge = RegistryMerge(held: [
            "did:plc:a": .init(id: newerHere, issuedAt: Self.login.addingTimeInterval(100)),
            "did:plc:b": .init(id: olderHere, issuedAt: Self.login.addingTimeInterval(10)),
            "did:plc:c": .init(id: same, issuedAt: Self.login.addingTimeInterval(50)),
            "did:plc:d": .init(id: onlyHere, issuedAt: Self.login),
        ], targetDefault: nil)
        #expect(merge.admit(Self.record("did:plc:a", refreshed: 20)) == nil, "the target's is newer")
        #expect(merge.admit(Self.record("did:plc:b", refreshed: 20)) != nil, "the source's is newer")
        #expect(merge.admit(Self.record("did:plc:c", refreshed: 50)) == nil, "a tie keeps the store in use")
        #expect(merge.admit(Self.record("did:plc:e", refreshed: nil)) != nil, "only in the source")
        #expect(merge.keeps(newerHere) && merge.keeps(same) && merge.keeps(onlyHere))
        #expect(!merge.keeps(olderHere), "replaced by the source's row")
        #expect(merge.added == 1)
        #expect(merge.decisions.map(\.kept) == [.target, .source, .target])
        #expect(merge.decisions.map(\.did) == ["did:plc:a", "did:plc:b", "did:plc:c"])
    }

    @Test("an OAuth login after the last refresh counts as the newer session")
    func oauthLogin() {
        let merge = RegistryMerge(held: ["did:plc:a": .init(id: UUID(), issuedAt: Self.login.addingTimeInterval(100))], targetDefault: nil)
        var record = Self.record("did:plc:a", refreshed: 10)
        record.oauth = OAuthSessionInfo(issuer: "https://auth.example.test", tokenEndpoint: "https://auth.example.test/token",
                                        revocationEndpoint: nil, scope: "atproto",
                                        sessionStartedAt: Self.login.addingTimeInterval(200), clientKind: .loopback,
                                        clientID: "http://localhost")
        #expect(RegistryMerge.issuedAt(record) == Self.login.addingTimeInterval(200))
        #expect(merge.admit(record) != nil)
    }

    @Test("the target's default stays the default; with none, the source's becomes it")
    func defaults() {
        let merge = RegistryMerge(held: ["did:plc:here": .init(id: UUID(), issuedAt: Self.login)], targetDefault: "did:plc:here")
        #expect(merge.admit(Self.record("did:plc:there", refreshed: 5, isDefault: true))?.isDefault == false)
        #expect(merge.admit(Self.record("did:plc:here", refreshed: 5))?.isDefault == true, "the default's newer row stays default")
        let none = RegistryMerge(held: ["did:plc:here": .init(id: UUID(), issuedAt: Self.login)], targetDefault: nil)
        #expect(none.admit(Self.record("did:plc:there", refreshed: 5, isDefault: true))?.isDefault == true)
    }

    @Test("client keys: the union; one key id holding two different keys is refused")
    func clientKeys() throws {
        let date = Self.login
        let mine = StoredClientKey(keyID: "k1", privateKey: Data([1, 2, 3]), createdAt: date)
        let theirs = StoredClientKey(keyID: "k2", privateKey: Data([4, 5, 6]), createdAt: date)
        let merged = try RegistryMerge.clientKeys(source: [mine, theirs], target: [mine])
        #expect(merged.map(\.keyID) == ["k1", "k2"])
        let clash = StoredClientKey(keyID: "k1", privateKey: Data([9]), createdAt: date)
        #expect(throws: StoreError.self) { try RegistryMerge.clientKeys(source: [clash], target: [mine]) }
    }
}
