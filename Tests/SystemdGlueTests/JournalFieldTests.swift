import Foundation
import Logging
import Testing
@testable import SystemdGlue

@Suite("Journal entries: priorities, structured fields, no secrets")
struct JournalFieldTests {
    static let jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJkaWQ6cGxjOmFiYyJ9.c2lnbmF0dXJlLWJ5dGVz"

    private func fields(_ level: Logger.Level = .info, _ message: String = "session refreshed",
                        _ metadata: Logger.Metadata = [:]) -> [String: String] {
        let list = JournalLog.fields(level: level, message: message, identifier: "blueskyd", label: "blueskyd",
                                            metadata: metadata, file: "X.swift", function: "f()", line: 7)
        var byName: [String: String] = [:]
        for field in list {
            let (name, value) = (field.prefix { $0 != "=" }, field.drop { $0 != "=" }.dropFirst())
            #expect(byName[String(name)] == nil, "\(name) appears once")
            byName[String(name)] = String(value)
        }
        return byName
    }

    @Test("PRIORITY follows syslog: critical 2 … debug and trace 7")
    func priorities() {
        let expected: [Logger.Level: String] = [.critical: "2", .error: "3", .warning: "4", .notice: "5",
                                                .info: "6", .debug: "7", .trace: "7"]
        for (level, priority) in expected {
            #expect(fields(level)["PRIORITY"] == priority, "\(level)")
        }
    }

    @Test("metadata become upper-case fields next to MESSAGE, the identifier and the code location")
    func structuredFields() {
        let entry = fields(.notice, "xrpc call failed", [
            "account": "0b5c…", "did": "did:plc:abc", "nsid": "app.bsky.feed.getTimeline", "outcome": "NeedsLogin",
            "peer.uid": "1000", "message": "clash",
        ])
        #expect(entry["MESSAGE"] == "xrpc call failed")
        #expect(entry["SYSLOG_IDENTIFIER"] == "blueskyd")
        #expect(entry["ACCOUNT"] == "0b5c…")
        #expect(entry["DID"] == "did:plc:abc")
        #expect(entry["NSID"] == "app.bsky.feed.getTimeline")
        #expect(entry["OUTCOME"] == "NeedsLogin")
        #expect(entry["PEER_UID"] == "1000")
        #expect(entry["META_MESSAGE"] == "clash", "a metadata key never overwrites MESSAGE")
        #expect(entry["CODE_FILE"] == "X.swift" && entry["CODE_LINE"] == "7")
    }

    @Test("field names are what the journal accepts")
    func fieldNames() {
        #expect(JournalLog.fieldName("retryInSeconds") == "RETRYINSECONDS")
        #expect(JournalLog.fieldName("_hidden") == "HIDDEN", "leading underscores are the journal's own")
        #expect(JournalLog.fieldName("1st") == "F_1ST")
        #expect(JournalLog.fieldName(String(repeating: "a", count: 80)).count == 64)
    }

    @Test("a token that slips into a message or a metadata value is redacted in both outputs")
    func tokensRedacted() {
        let entry = fields(.error, "upstream said: Bearer \(Self.jwt) is bad", ["error": "\(Self.jwt)"])
        #expect(entry["MESSAGE"] == "upstream said: Bearer [redacted] is bad")
        #expect(entry["ERROR"] == "[redacted]")
        let line = ConsoleLog.format(date: Date(timeIntervalSince1970: 0), level: .error, label: "blueskyd",
                                            message: "token \(Self.jwt)", metadata: ["error": "x \(Self.jwt) y"])
        #expect(!line.contains("eyJ"), "\(line)")
        #expect(line.hasSuffix("error blueskyd: token [redacted] error=x [redacted] y\n"), "\(line)")
    }

    @Test("a console line shows a server's control and bidirectional characters escaped, never raw (a blind attack)")
    func controlsEscaped() {
        let line = ConsoleLog.format(date: Date(timeIntervalSince1970: 0), level: .error, label: "blueskyd",
                                     message: "refused", metadata: ["reason": "a\u{1B}]0;t\u{7}b\u{9B}c\u{202E}d\u{2066}e"])
        #expect(!line.unicodeScalars.contains { [0x1B, 0x07, 0x9B, 0x202E, 0x2066].contains($0.value) }, "\(line)")
        #expect(line.contains(#"a\u{1b}]0;t\u{7}b\u{9b}c\u{202e}d\u{2066}e"#), "\(line)")
    }

    @Test("ordinary text that merely contains eyJ is left alone")
    func noFalsePositives() {
        #expect(LogRedaction.redact("heyJude.mp3") == "heyJude.mp3")
        #expect(LogRedaction.redact("did:plc:eyJabc") == "did:plc:eyJabc")
        #expect(LogRedaction.redact("no secrets here") == "no secrets here")
    }

    @Test("console lines keep one line per entry and sorted metadata")
    func consoleFormat() {
        let line = ConsoleLog.format(date: Date(timeIntervalSince1970: 0), level: .info, label: "blueskyd",
                                            message: "two\nlines", metadata: ["b": "2", "a": "1"])
        #expect(line == "1970-01-01T00:00:00.000Z info blueskyd: two lines a=1 b=2\n")
        let hostile = ConsoleLog.format(date: Date(timeIntervalSince1970: 0), level: .info, label: "blueskyd",
                                               message: "reason", metadata: ["reason": "\u{1B}[2J\u{1B}[31mred\r\n"])
        #expect(hostile == "1970-01-01T00:00:00.000Z info blueskyd: reason reason=\\u{1b}[2J\\u{1b}[31mred  \n",
                "a server's escape sequences never reach the terminal: \(hostile)")
    }
}
