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

    @Test("during a rekey while hosts run: the keys held, the one the host seals with, and rows per key; one key prints no line")
    func storeKeysLine() {
        let info: JSONValue = ["name": "blueskyd", "version": "1.0", "pid": 42, "uid": 1000]
        let rotating: JSONValue = ["storeKey": "aaaa", "storeKeys": ["held": ["bbbb", "aaaa"], "writing": "bbbb", "tenant": "bbbb",
                                                                     "rows": ["aaaa": 12, "bbbb": 30]]]
        let lines = StatusSummary.lines(info: info, status: rotating, now: Date())
        #expect(lines.contains("store keys:    bbbb, aaaa held, sealing with bbbb; rows per key: aaaa 12, bbbb 30"), "\(lines)")
        let settled: JSONValue = ["storeKey": "bbbb", "storeKeys": ["held": ["bbbb"], "writing": "bbbb", "rows": ["bbbb": 42]]]
        #expect(!StatusSummary.lines(info: info, status: settled, now: Date()).contains { $0.hasPrefix("store keys:") })
    }
}
