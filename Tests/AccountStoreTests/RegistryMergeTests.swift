import AccountStoreCore
import Foundation
import Testing

/// Which side's row each account keeps when a registry is merged into a store in use.
@Suite("Merging a registry: each account keeps its newer session")
struct RegistryMergeTests {
    static let login = Date(timeIntervalSince1970: 1_800_000_000)

    /// A compact JWS whose payload carries `iat` (unsigned: the merge reads, never verifies).
    static func jwt(issued: Date) -> String {
        let payload = Data(#"{"iat":\#(Int(issued.timeIntervalSince1970)),"sub":"did:plc:x"}"#.utf8).base64EncodedString()
            .replacingOccurrences(of: "=", with: "").replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        return "eyJhbGciOiJFUzI1NksifQ.\(payload).c2ln"
    }

    /// An account whose row says it was refreshed `refreshed` seconds after the login, and whose
    /// tokens (JWTs, as a PDS issues) say they were issued `issued` seconds after it (opaque tokens
    /// when nil).
    static func account(_ did: String, refreshed: TimeInterval?, issued: TimeInterval? = nil, isDefault: Bool = false) -> PortableAccount {
        let record = AccountRecord(did: did, pds: "https://pds.example.test", authKind: .appPassword, isDefault: isDefault,
                                   createdAt: login, lastRefreshAt: refreshed.map { login.addingTimeInterval($0) })
        let token = issued.map { jwt(issued: login.addingTimeInterval($0)) } ?? "opaque-\(did)"
        return PortableAccount(record: record, secrets: AccountSecrets(accessToken: token, refreshToken: "opaque-refresh"))
    }

    static func held(_ seconds: TimeInterval, sealed: Bool, id: UUID = UUID()) -> RegistryMerge.Held {
        .init(id: id, issued: .init(at: login.addingTimeInterval(seconds), sealed: sealed))
    }

    @Test("by the tokens' issue times: the newer session wins, a tie keeps the target's, the rest added or kept")
    func decisions() {
        let (newerHere, olderHere, same, onlyHere) = (UUID(), UUID(), UUID(), UUID())
        let merge = RegistryMerge(held: [
            "did:plc:a": Self.held(100, sealed: true, id: newerHere),
            "did:plc:b": Self.held(10, sealed: true, id: olderHere),
            "did:plc:c": Self.held(50, sealed: true, id: same),
            "did:plc:d": Self.held(0, sealed: true, id: onlyHere),
        ], targetDefault: nil)
        #expect(merge.admit(Self.account("did:plc:a", refreshed: nil, issued: 20)) == nil, "the target's is newer")
        let replacing = merge.admit(Self.account("did:plc:b", refreshed: nil, issued: 20))
        #expect(replacing != nil, "the source's is newer")
        #expect(replacing?.record.id == olderHere, "the source's session under the target's id (a blind attack)")
        #expect(merge.admit(Self.account("did:plc:c", refreshed: nil, issued: 50)) == nil, "a tie keeps the store in use")
        #expect(merge.admit(Self.account("did:plc:e", refreshed: nil, issued: 5)) != nil, "only in the source")
        #expect(merge.keeps(newerHere) && merge.keeps(same) && merge.keeps(onlyHere))
        #expect(!merge.keeps(olderHere), "replaced by the source's row")
        #expect(merge.added == ["did:plc:e"])
        #expect(merge.decisions.map(\.kept) == [.target, .source, .target])
        #expect(merge.decisions.allSatisfy { $0.bySealedTokens })
    }

    @Test("a row's dates moved by someone without the key do not decide when the tokens say (a blind attack)")
    func forgedDates() {
        let merge = RegistryMerge(held: ["did:plc:a": Self.held(100, sealed: true)], targetDefault: nil)
        // The source's row claims a refresh long after the target's, its tokens say otherwise.
        let forged = Self.account("did:plc:a", refreshed: 1_000_000, issued: 10)
        #expect(RegistryMerge.issued(forged) == .init(at: Self.login.addingTimeInterval(10), sealed: true))
        #expect(merge.admit(forged) == nil, "the target's newer session is kept")
    }

    @Test("opaque tokens on both sides: the rows' dates decide, and the report says so; one side sealed: the target's kept")
    func opaqueTokens() {
        let merge = RegistryMerge(held: ["did:plc:a": Self.held(10, sealed: false), "did:plc:b": Self.held(10, sealed: true)],
                                  targetDefault: nil)
        #expect(merge.admit(Self.account("did:plc:a", refreshed: 20)) != nil)
        #expect(merge.admit(Self.account("did:plc:b", refreshed: 20)) == nil, "a date against a sealed time never wins")
        #expect(merge.decisions.map(\.bySealedTokens) == [false, false])
    }

    @Test("an OAuth login after the last refresh counts as the newer session when the tokens do not say")
    func oauthLogin() {
        var account = Self.account("did:plc:a", refreshed: 10)
        account.record.oauth = OAuthSessionInfo(issuer: "https://auth.example.test", tokenEndpoint: "https://auth.example.test/token",
                                                revocationEndpoint: nil, scope: "atproto",
                                                sessionStartedAt: Self.login.addingTimeInterval(200), clientKind: .loopback,
                                                clientID: "http://localhost")
        #expect(RegistryMerge.issued(account) == .init(at: Self.login.addingTimeInterval(200), sealed: false))
        let merge = RegistryMerge(held: ["did:plc:a": Self.held(100, sealed: false)], targetDefault: nil)
        #expect(merge.admit(account) != nil)
    }

    @Test("the target's default stays the default; with none, the source's becomes it")
    func defaults() {
        let here = UUID()
        let merge = RegistryMerge(held: ["did:plc:here": Self.held(0, sealed: true, id: here)], targetDefault: "did:plc:here")
        #expect(merge.targetDefaultID == here, "the report names the default the target keeps, by its own id")
        #expect(merge.admit(Self.account("did:plc:there", refreshed: nil, issued: 5, isDefault: true))?.record.isDefault == false)
        #expect(merge.admit(Self.account("did:plc:here", refreshed: nil, issued: 5))?.record.isDefault == true,
                "the default's newer row stays default")
        let none = RegistryMerge(held: ["did:plc:here": Self.held(0, sealed: true)], targetDefault: nil)
        #expect(none.targetDefaultID == nil)
        #expect(none.admit(Self.account("did:plc:there", refreshed: nil, issued: 5, isDefault: true))?.record.isDefault == true)
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
