import Foundation
import Testing
@testable import BlueskyDaemon

@Suite("store import --check: what the operator reads")
struct ImportCheckReportTests {
    static func line(_ handle: String?, _ outcome: ImportCheck.Outcome, _ reason: String? = nil) -> ImportCheck.Line {
        ImportCheck.Line(id: UUID(), did: "did:plc:" + (handle ?? "nohandle"), handle: handle, kind: .appPassword,
                         outcome: outcome, reason: reason)
    }

    @Test("counts first, then each account with its outcome and why; what to do about each kind of trouble")
    func summary() {
        let text = ImportCheck.summary([
            Self.line("alice.test", .live), Self.line("bob.test", .needsLogin, "Token has been revoked"),
            Self.line(nil, .unreachable, "HTTP 503"),
        ])
        let lines = text.split(separator: "\n").map(String.init)
        #expect(lines.first == "Checked 3 sessions: 1 live, 1 needs-login, 1 unreachable.")
        #expect(lines.contains("  needs-login  @bob.test (app-password): Token has been revoked"))
        #expect(lines.contains("  unreachable  did:plc:nohandle (app-password): HTTP 503"))
        #expect(text.contains("bskyctl login again") && text.contains("tries it again on its schedule"))
    }

    @Test("a server's words cannot drive the terminal: control characters are shown escaped")
    func escapesReasons() {
        let text = ImportCheck.summary([Self.line("eve.test", .needsLogin, "bad\r\u{1B}[2Kall live")])
        #expect(!text.contains("\u{1B}") && text.contains("bad\\u{D}\\u{1B}[2Kall live"))
    }

    @Test("many accounts: the live ones are counted, not listed; the others are always listed")
    func manyAccounts() {
        let lines = (0..<150).map { Self.line("user\($0).test", .live) } + [Self.line("late.test", .unreachable, "timeout")]
        let text = ImportCheck.summary(lines)
        #expect(text.split(separator: "\n").count == 3)
        #expect(text.contains("150 live, 1 unreachable") && text.contains("@late.test"))
    }

    @Test("a merge that kept the store's session for every account restored none: said so, not an empty count")
    func nothingChecked() {
        #expect(ImportCheck.summary([]).hasPrefix("Checked no session: the import restored none"))
    }
}
