import Testing
import WebBasics

@Suite struct PercentDecodingTests {
    @Test func escapesBecomeTheirBytes() {
        #expect(PercentDecoding.decode("did:web:api.bsky.app%23bsky_appview", plusIsSpace: false) == "did:web:api.bsky.app#bsky_appview")
        #expect(PercentDecoding.decode("caf%C3%A9+au+lait", plusIsSpace: true) == "café au lait")
        #expect(PercentDecoding.decode("a+b", plusIsSpace: false) == "a+b")
        #expect(PercentDecoding.decode("%2B", plusIsSpace: true) == "+")
    }

    @Test func brokenEscapesAndNonUTF8AreRefused() {
        for broken in ["%", "%2", "%zz", "a%G1", "%FF"] {
            #expect(PercentDecoding.decode(broken, plusIsSpace: true) == nil, "\(broken)")
        }
    }
}
