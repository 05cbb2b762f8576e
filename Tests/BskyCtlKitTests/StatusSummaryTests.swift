import BskyCtlKit
import Foundation
import JSONRPC
import Testing

@Suite("What bskyctl status prints")
struct StatusSummaryTests {
    @Test("the store key's fingerprint (after a rekey, which key this host opens the store with) and the counts")
    func storeKeyLine() {
        let info: JSONValue = ["name": "blueskyd", "version": "1.0", "pid": 42, "uid": 1000, "stateDirectory": "/var/lib/x"]
        let status: JSONValue = ["accounts": 3, "active": 2, "needsLogin": 1, "refreshing": 0, "storeKey": "5d6a5104860c4787"]
        let lines = StatusSummary.lines(info: info, status: status, now: Date())
        #expect(lines.contains("store key:     5d6a5104860c4787 (fingerprint)"), "\(lines)")
        #expect(lines.contains("accounts:      3 (2 active, 1 need login, 0 refreshing)"), "\(lines)")
        let older = StatusSummary.lines(info: info, status: ["accounts": 0], now: Date())
        #expect(!older.contains { $0.hasPrefix("store key:") }, "a daemon that does not say it prints no line")
    }
}
