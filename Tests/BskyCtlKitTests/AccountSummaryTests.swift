import BskyCtlKit
import JSONRPC
import Testing

/// What bskyctl suggests for an account whose row's seal does not hold: nothing built from the
/// row, whose handle, DID and issuer may be an intruder's (a blind attack followed the old hint
/// and sent the app password to the intruder's server).
@Suite("The login bskyctl suggests")
struct AccountSummaryTests {
    @Test("an account needing a login is told its own command; a tampered one a command built from nothing the row says")
    func loginHint() {
        let plain = AccountSummary(json: ["id": "1", "did": "did:plc:alice", "handle": "alice.test", "auth": "app-password",
                                          "state": "needs-login"])
        #expect(plain.loginCommand == "bskyctl login alice.test --app-password")
        let tampered = AccountSummary(json: ["id": "1", "did": "did:plc:evil", "handle": "evil.test", "handleVerified": false,
                                             "auth": "app-password", "state": "needs-login", "tampered": "tampered"])
        #expect(!tampered.loginCommand.contains("evil") && tampered.loginCommand.contains("<your own handle>"))
        #expect(tampered.displayHandle.contains("unverified"))
    }
}
