import Testing
import WebBasics

@Suite("A server's words, kept short")
struct ServerTextTests {
    @Test("short text is kept as it is; long text is cut at a character, says how long it was, and fits the limit whole")
    func clipped() {
        #expect(ServerText.clipped("Refresh token replayed") == "Refresh token replayed")
        let long = String(repeating: "é", count: 400)   // 800 bytes of UTF-8
        let cut = ServerText.clipped(long)
        #expect(cut.hasPrefix("éé") && cut.hasSuffix("… (800 bytes, cut)") && cut.utf8.count <= ServerText.limit)
        #expect(ServerText.clipped(String(repeating: "a", count: 100), limit: 40) == String(repeating: "a", count: 20) + "… (100 bytes, cut)")
        #expect(ServerText.clipped(nil as String?) == nil)
    }

    @Test("clipping what was clipped changes nothing", arguments: [1_000, 129, 600, 100_000])
    func idempotent(length: Int) {
        let text = String(repeating: "x", count: length)
        for limit in [128, 512] {
            let once = ServerText.clipped(text, limit: limit)
            #expect(ServerText.clipped(once, limit: limit) == once)
        }
    }
}
