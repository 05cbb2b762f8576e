import ArgumentParser
import FoundationEssentials
import JSONRPC

/// `bskyctl events`: follows blueskyd's events, one line each, until Ctrl-C or the daemon stops.
struct EventsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "events",
        abstract: "Follow account and daemon events as they happen.",
        discussion: """
            Prints one line per event: the time, the kind, the account, and what happened. \
            With --json, prints each event's params as one line of JSON (an "events.gap" \
            notice as {"kind": "events.gap", ...}). Runs until Ctrl-C; when blueskyd stops, says \
            so and exits 69.

            Kinds: account.added, account.removed, account.refreshed, account.retrying, \
            account.recovered, account.needsLogin, account.moved, account.handleChanged, \
            account.sessionEndingSoon, account.profileUpdated, account.defaultChanged, account.tampered, \
            login.completed, login.failed, daemon.storeUnavailable, daemon.storeAvailable, \
            daemon.stopping.
            """)

    @OptionGroup var connection: ConnectionOptions

    @Option(name: .customLong("kind"), help: ArgumentHelp("Only events of this kind (repeatable).", valueName: "kind"))
    var kinds: [String] = []

    @Option(name: .customLong("account"),
            help: ArgumentHelp("Only events of this account: handle, DID or UUID (repeatable).", valueName: "account"))
    var accounts: [String] = []

    @Option(name: .long, help: ArgumentHelp("Resume after this event number (a \"seq\" seen earlier).", valueName: "seq"))
    var since: UInt64?

    @Flag(name: .long, help: "Print each event's params as one line of JSON instead of text.")
    var json = false

    func run() throws {
        let client = try connection.connect()
        var params: [String: JSONValue] = [:]
        if !kinds.isEmpty { params["kinds"] = .array(kinds.map(JSONValue.string)) }
        if !accounts.isEmpty { params["accounts"] = .array(accounts.map(JSONValue.string)) }
        if let since { params["since"] = .number(Double(since)) }
        _ = try client.call("events.subscribe", params.isEmpty ? nil : .object(params))
        try client.followNotifications { method, params in
            let line = json ? EventLine.json(method: method, params) : EventLine.text(method: method, params, now: Date())
            Console.printLine(line)
            return method != "event" || params["kind"]?.stringValue != "daemon.stopping"
        }
        throw CtlFailure("blueskyd stopped; the event stream ended", status: .daemonUnavailable)
    }
}

extension DaemonClient {
    /// Reads notifications until `handle` returns false or the connection ends.
    func followNotifications(_ handle: (String, JSONValue) -> Bool) throws(CtlFailure) {
        do {
            try connection.waitForeverOnReads()
            while let line = try connection.readLineBytes() {
                guard let message = try? JSONValue.parse(line), let method = message["method"]?.stringValue else { continue }
                if !handle(method, message["params"] ?? .null) { return }
            }
        } catch {
            throw Self.connectionFailure(error, socketPath: socketPath)
        }
    }
}
