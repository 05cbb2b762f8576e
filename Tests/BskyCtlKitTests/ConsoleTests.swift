import JSONRPC
import Testing
@testable import BskyCtlKit

@Suite("bskyctl's terminal output")
struct ConsoleTests {
    @Test("a server's escape sequences are shown, not obeyed; newlines, tabs and other text pass")
    func terminalSafe() {
        #expect(Console.terminalSafe("\u{1B}[2J\u{1B}[31mSession expired\u{7}") == #"\u{1b}[2J\u{1b}[31mSession expired\u{7}"#)
        #expect(Console.terminalSafe("line one\n\tline two é 😀") == "line one\n\tline two é 😀")
        #expect(Console.terminalSafe("carriage\rreturn \u{9B}31m") == #"carriage\u{d}return \u{9b}31m"#)
        #expect(Console.terminalSafe("run: bskyctl login \u{202E}lacol") == #"run: bskyctl login \u{202e}lacol"#)
    }

    @Test("JSON output stays JSON: C1 and bidirectional controls in a string become JSON escapes (a blind attack)")
    func jsonStaysJSON() throws {
        let value = JSONValue.object(["stateReason": .string("bad\u{9B}31m \u{202E}txt\u{1B}[2J")])
        let printed = value.prettyPrinted
        #expect(!printed.unicodeScalars.contains { $0.value == 0x9B || $0.value == 0x202E || $0.value == 0x1B })
        #expect(try JSONValue.parse(Array(printed.utf8)) == value, "\(printed)")
        #expect(Console.terminalSafe(printed) == printed, "nothing left for the terminal filter to change")
    }

    @Test("leading connection options move behind the command name; nothing else moves")
    func leadingOptions() {
        #expect(BskyCtlMain.movingLeadingConnectionOptions(["--socket", "/s", "accounts", "--json"])
                == ["accounts", "--socket", "/s", "--json"])
        #expect(BskyCtlMain.movingLeadingConnectionOptions(["--timeout=3", "--socket", "/s", "proxy", "a.b.c", "--", "-x"])
                == ["proxy", "--timeout=3", "--socket", "/s", "a.b.c", "--", "-x"])
        #expect(BskyCtlMain.movingLeadingConnectionOptions(["accounts", "--socket", "/s"]) == ["accounts", "--socket", "/s"])
        #expect(BskyCtlMain.movingLeadingConnectionOptions(["--socket"]) == ["--socket"])
        #expect(BskyCtlMain.movingLeadingConnectionOptions(["--socket", "/s", "--help"]) == ["--socket", "/s", "--help"])
    }

    @Test("exit statuses of daemon errors: bad arguments are a usage error")
    func exitStatuses() {
        #expect(CtlFailure.exitStatus(for: RPCError(code: -32602, name: "InvalidParams", message: "x")) == .usage)
        #expect(CtlFailure.exitStatus(for: RPCError(code: -32001, name: "AccountNotFound", message: "x")) == .requestFailed)
    }
}
