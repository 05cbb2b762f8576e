import ArgumentParser
import FoundationEssentials
import JSONRPC

/// `bskyctl call`: any JSON-RPC method, with raw JSON in and out.
struct CallCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "call",
        abstract: "Call a blueskyd JSON-RPC method directly.",
        discussion: """
            Sends {"jsonrpc": "2.0", "id": …, "method": <method>, "params": <params>} and prints \
            the result as pretty JSON. On an error reply, prints its message on stderr and exits \
            1 (77 for PermissionDenied); with --json the error object is also printed on stdout.

            Examples:
              bskyctl call daemon.info
              bskyctl call accounts.refresh '{"account": "alice.bsky.social"}'
              bskyctl call xrpc.call - < request.json
            """)

    @Argument(help: ArgumentHelp("The method, e.g. daemon.status (see docs/PROTOCOL.md).", valueName: "method"))
    var method: String

    @Argument(help: ArgumentHelp("The params: a JSON object or array, or - to read it from stdin.", valueName: "params-json"))
    var params: String?

    @OptionGroup var connection: ConnectionOptions
    @OptionGroup var output: OutputOptions

    func run() throws {
        let parsedParams = try parseParams()
        switch try connection.connect().callForResult(method, parsedParams) {
        case .success(let result):
            Console.printLine(result.prettyPrinted)
        case .failure(let error):
            if output.json { Console.printLine(error.json.prettyPrinted) }
            throw CtlFailure(error.message, status: CtlFailure.exitStatus(for: error))
        }
    }

    private func parseParams() throws(CtlFailure) -> JSONValue? {
        guard let params else { return nil }
        let bytes = params == "-" ? StandardInput.readAll() : Array(params.utf8)
        let value: JSONValue
        do {
            value = try JSONValue.parse(bytes)
        } catch {
            throw .usage("the params are not valid JSON")
        }
        guard value.objectValue != nil || value.arrayValue != nil else {
            throw .usage("the params must be a JSON object or array")
        }
        return value
    }
}
