import Testing
import WebBasics

@Suite("A server's words, kept short")
struct ServerTextTests {
    @Test("short text is kept as it is; long text is cut at a character within the limit and says how long it was")
    func clipped() {
        #expect(ServerText.clipped("Refresh token replayed") == "Refresh token replayed")
        let long = String(repeating: "é", count: 400)   // 800 bytes of UTF-8
        let cut = ServerText.clipped(long)
        #expect(cut.hasPrefix(String(repeating: "é", count: 256)) && cut.hasSuffix("… (800 bytes, cut)"))
        #expect(cut.utf8.count <= ServerText.limit + 32)
        #expect(ServerText.clipped("abcdef", limit: 3) == "abc… (6 bytes, cut)")
        #expect(ServerText.clipped(nil as String?) == nil)
    }
}
