import DPoP
import Foundation
import Testing

@Suite("DPoP nonce cache")
struct DPoPNonceCacheTests {
    let pds = "https://pds.example.com"
    let issuer = "https://auth.example.com"

    @Test("the latest nonce wins per server origin; an account uses the server's newest, whoever received it")
    func latestPerAccountAndOrigin() {
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let cache = DPoPNonceCache()
        #expect(cache.nonce(account: "did:plc:a", origin: pds) == nil)
        cache.update(account: "did:plc:a", origin: pds, nonce: "n1", receivedAt: now)
        cache.update(account: "did:plc:a", origin: pds, nonce: "n2", receivedAt: now.addingTimeInterval(1))
        cache.update(account: "did:plc:a", origin: issuer, nonce: "as-1", receivedAt: now.addingTimeInterval(2))
        #expect(cache.nonce(account: "did:plc:a", origin: pds) == "n2")
        #expect(cache.nonce(account: "did:plc:a", origin: issuer) == "as-1")
        #expect(cache.nonce(account: "did:plc:b", origin: issuer) == "as-1", "b never talked to the issuer: a's newer nonce")
        cache.update(account: "did:plc:b", origin: pds, nonce: "b-1", receivedAt: now.addingTimeInterval(3))
        #expect(cache.nonce(account: "did:plc:a", origin: pds) == "b-1", "the server's newest nonce, though b got it")
        cache.update(account: "did:plc:a", origin: pds, nonce: "n3", receivedAt: now.addingTimeInterval(4))
        #expect(cache.nonce(account: "did:plc:b", origin: pds) == "n3")
        #expect(cache.entries(account: "did:plc:b").map(\.nonce) == ["b-1"], "what b itself received, for persisting")
        #expect(cache.entries(account: "did:plc:a").map(\.origin) == [issuer, pds])
    }

    @Test("a response without a DPoP-Nonce header leaves the remembered one")
    func absentHeader() {
        let cache = DPoPNonceCache()
        cache.update(account: "a", origin: pds, nonce: "n1")
        cache.update(account: "a", origin: pds, nonce: nil)
        cache.update(account: "a", origin: pds, nonce: "")
        #expect(cache.nonce(account: "a", origin: pds) == "n1")
    }

    @Test("exported entries survive JSON and import into a new cache")
    func persistence() throws {
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let cache = DPoPNonceCache()
        cache.update(account: "a", origin: pds, nonce: "n1", receivedAt: now)
        cache.update(account: "b", origin: issuer, nonce: "n2", receivedAt: now)
        let data = try JSONEncoder().encode(cache.exported())
        let restored = DPoPNonceCache()
        restored.importEntries(try JSONDecoder().decode([DPoPNonceCache.Entry].self, from: data), now: now.addingTimeInterval(60))
        #expect(restored.exported() == cache.exported())
        #expect(restored.nonce(account: "b", origin: issuer) == "n2")
    }

    @Test("import skips stale nonces and never replaces a newer one")
    func importRules() {
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let cache = DPoPNonceCache()
        cache.update(account: "a", origin: pds, nonce: "fresh", receivedAt: now)
        cache.importEntries([
            .init(account: "a", origin: pds, nonce: "older", receivedAt: now.addingTimeInterval(-10)),
            .init(account: "b", origin: pds, nonce: "stale", receivedAt: now.addingTimeInterval(-600)),
            .init(account: "c", origin: pds, nonce: "ok", receivedAt: now.addingTimeInterval(-30)),
        ], now: now, maxAge: 180)
        #expect(cache.nonce(account: "a", origin: pds) == "fresh")
        #expect(cache.entries(account: "b").isEmpty, "a stale nonce is not imported")
        #expect(cache.entries(account: "c").map(\.nonce) == ["ok"])
        #expect(cache.nonce(account: "c", origin: pds) == "fresh", "the server's newest nonce wins over c's older one")
    }

    @Test("forgetting an account drops only its nonces")
    func forget() {
        let cache = DPoPNonceCache()
        cache.update(account: "a", origin: pds, nonce: "1")
        cache.update(account: "a", origin: issuer, nonce: "2")
        cache.update(account: "b", origin: pds, nonce: "3")
        cache.forget(account: "a")
        #expect(cache.exported().map(\.nonce) == ["3"])
    }

    @Test("moving a login's nonces to the DID keeps the newer value on each origin")
    func move() {
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let cache = DPoPNonceCache()
        cache.update(account: "alice.example.com", origin: issuer, nonce: "login-as", receivedAt: now)
        cache.update(account: "alice.example.com", origin: pds, nonce: "login-pds", receivedAt: now)
        cache.update(account: "did:plc:a", origin: pds, nonce: "newer-pds", receivedAt: now.addingTimeInterval(5))
        cache.move(from: "alice.example.com", to: "did:plc:a")
        #expect(cache.nonce(account: "did:plc:a", origin: issuer) == "login-as")
        #expect(cache.nonce(account: "did:plc:a", origin: pds) == "newer-pds")
        #expect(cache.exported().allSatisfy { $0.account == "did:plc:a" })
    }

    @Test("concurrent updates from many tasks leave one of the written values")
    func concurrency() async {
        let cache = DPoPNonceCache()
        await withTaskGroup(of: Void.self) { group in
            for index in 0..<200 {
                group.addTask { cache.update(account: "a", origin: "https://pds.example.com", nonce: "n\(index)") }
            }
        }
        let value = cache.nonce(account: "a", origin: pds)
        #expect(value.map { $0.hasPrefix("n") } == true)
        #expect(cache.exported().count == 1)
    }
}
