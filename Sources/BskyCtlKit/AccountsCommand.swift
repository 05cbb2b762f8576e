import ArgumentParser
import FoundationEssentials
import JSONRPC

/// `bskyctl accounts`: the registered accounts as a table, or `accounts.list` as JSON.
struct AccountsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "accounts",
        abstract: "List the accounts blueskyd keeps signed in.",
        discussion: """
            Columns: a * marks the default account; HANDLE ("(handle unverified)" when the handle \
            does not currently resolve to the DID); NAME (the profile's display name); DID; AUTH (how it logs in); STATE (active, \
            needs-login, retrying); ACCESS EXPIRES (when the current access token expires); \
            LAST REFRESH; ID (the account's UUID). An account that is not active gets an indented \
            line under its row saying why.

            With --json, prints the accounts.list result: {"accounts": [Account, ...]}.
            """)

    @OptionGroup var connection: ConnectionOptions
    @OptionGroup var output: OutputOptions

    func run() throws {
        let client = try connection.connect()
        let result = try client.call("accounts.list")
        if output.json {
            Console.printLine(result.prettyPrinted)
            return
        }
        guard let list = result["accounts"]?.arrayValue else {
            throw CtlFailure.requestFailed("blueskyd's accounts.list reply has no accounts array")
        }
        let accounts = list.map(AccountSummary.init(json:))
        for line in AccountTable.render(accounts, now: Date()) { Console.printLine(line) }
    }
}
