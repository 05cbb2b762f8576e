import Testing
@testable import BlueskyDaemon

@Suite("blueskyd store reseal: what the operator reads")
struct StoreResealTests {
    @Test("a row's values are shown as they are, never as a terminal would take them", arguments: [
        ("https://evil.example\r\u{1B}[Kpds=https://pds.bsky.social", "https://evil.example\\u{D}\\u{1B}[Kpds=https://pds.bsky.social"),
        ("https://pds.example", "https://pds.example"),
        ("https://xn--pds.example/\u{202E}lmth", "https://xn--pds.example/\\u{202E}lmth"),
        ("a\\b", "a\\u{5C}b"),
    ])
    func visible(stored: String, shown: String) {
        #expect(StoreReseal.visible(stored) == shown)
    }
}
