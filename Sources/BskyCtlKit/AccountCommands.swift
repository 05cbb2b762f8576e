import ArgumentParser
import FoundationEssentials
import JSONRPC

/// `bskyctl logout`: ends the server session and forgets the account (`accounts.remove`).
struct LogoutCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "logout",
        abstract: "Remove an account: end its server session and delete its secrets.",
        discussion: """
            The account is removed even when its server cannot be reached; the output says \
            whether the server session was ended.

            Prints: Removed <handle> (<did>), account <uuid>. and then either \
            "The server session was ended." or "The server session could not be ended \
            (the server was not reachable); the account was removed here anyway."
            """)

    @Argument(help: ArgumentHelp("The account: its UUID, DID or handle.", valueName: "account"))
    var account: String

    @OptionGroup var connection: ConnectionOptions
    @OptionGroup var output: OutputOptions

    func run() throws {
        let result = try connection.connect()
            .call("accounts.remove", ["account": .string(account)], context: RequestContext(account: account))
        if output.json { return Console.printLine(result.prettyPrinted) }
        let removed = try AccountSummary.fromResult(result)
        Console.printLine("Removed \(removed.identification).")
        if result["serverSessionEnded"]?.boolValue == true {
            Console.printLine("The server session was ended.")
        } else {
            Console.printLine("The server session could not be ended (the server was not reachable); the account was removed here anyway.")
        }
    }
}

/// `bskyctl use`: chooses the default account (`accounts.setDefault`).
struct UseCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "use",
        abstract: "Make an account the default one.",
        discussion: """
            The default account is used by `proxy` and `refresh` when no account is named.

            Prints: Default account is now <handle> (<did>), account <uuid>.
            """)

    @Argument(help: ArgumentHelp("The account: its UUID, DID or handle.", valueName: "account"))
    var account: String

    @OptionGroup var connection: ConnectionOptions
    @OptionGroup var output: OutputOptions

    func run() throws {
        let result = try connection.connect()
            .call("accounts.setDefault", ["account": .string(account)], context: RequestContext(account: account))
        if output.json { return Console.printLine(result.prettyPrinted) }
        let chosen = try AccountSummary.fromResult(result)
        Console.printLine("Default account is now \(chosen.identification).")
    }
}

/// `bskyctl refresh`: refreshes an account's tokens now (`accounts.refresh`).
struct RefreshCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "refresh",
        abstract: "Refresh an account's tokens now (blueskyd also does this by itself).",
        discussion: """
            Without an account, refreshes the default account. Joins a refresh already in flight.

            Prints: Refreshed <handle> (<did>), account <uuid>. and then \
            "Access token expires in 1h 59m (<RFC 3339 time>)."; an account left in a state other \
            than active gets a line saying why.
            """)

    @Argument(help: ArgumentHelp("The account: its UUID, DID or handle (default: the default account).", valueName: "account"))
    var account: String?

    @Flag(help: "Try now, even while the account waits out a backoff after a failure.")
    var force = false

    @OptionGroup var connection: ConnectionOptions
    @OptionGroup var output: OutputOptions

    func run() throws {
        var fields: [String: JSONValue] = [:]
        if let account { fields["account"] = .string(account) }
        if force { fields["force"] = true }
        let params = JSONValue.object(fields)
        let result = try connection.connect()
            .call("accounts.refresh", params, context: RequestContext(account: account))
        if output.json { return Console.printLine(result.prettyPrinted) }
        let refreshed = try AccountSummary.fromResult(result)
        Console.printLine("Refreshed \(refreshed.identification).")
        if let expiry = refreshed.accessExpiresAt {
            let relative = RelativeTime.expiry(expiry, now: Date())
            let when = Timestamp.format(expiry)
            Console.printLine(relative == "expired" ? "Access token has expired (\(when))." : "Access token expires \(relative) (\(when)).")
        }
        if let note = AccountTable.stateNote(for: refreshed) { Console.printLine(note) }
    }
}
