import Testing
@testable import BlueskyDaemon

@Suite("blueskyd store: how a store is named")
struct StoreEndpointTests {
    @Test("a store URL carrying a password is refused with the settings' reason, and the password is never shown (a blind attack)",
          arguments: ["postgresql://tc:tcpw-secret@db.example/blueskyd", "postgresql://tc@db.example/blueskyd?password=tcpw-secret"])
    func passwordNeverShown(url: String) {
        do {
            _ = try StoreEndpoint.place(url, tenant: nil, passwordFile: nil)
            Issue.record("\(url) was taken")
        } catch {
            #expect(!error.description.contains("tcpw-secret"), "\(error.description)")
            #expect(error.exitCode == .usage)
            #expect(error.description.contains("password") || error.description.contains("parameter"), "\(error.description)")
        }
    }
}
