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
