import ArgumentParser
import FoundationEssentials
import JSONRPC

/// `bskyctl proxy`: one XRPC call through blueskyd, signed as an account (`xrpc.call`).
struct ProxyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "proxy",
        abstract: "Make an XRPC call to an account's PDS through blueskyd.",
        discussion: """
            Prints the response body: JSON pretty-printed, any other content type as raw bytes \
            (to stdout, or to --output FILE). With --json, prints the whole result instead: \
            {"status", "contentType", "headers", "body" or "bodyBase64"}.

            If the server answers with a status of 400 or more, prints \
            "bskyctl: error: <status> <error>: <message>" on stderr and exits 1 (with --json the \
            result is still printed on stdout).

            Whether the NSID is a query (GET) or a procedure (POST) comes from the Lexicons \
            bundled with blueskyd; for other NSIDs pass --query or --procedure.

            Examples:
              bskyctl proxy app.bsky.actor.getProfile --param actor=alice.bsky.social
              bskyctl proxy app.bsky.feed.getPosts --param uris=at://… --param uris=at://…
              echo '{"repo":"did:plc:…","collection":"app.bsky.feed.post","record":{…}}' \\
                | bskyctl proxy com.atproto.repo.createRecord --input -
              bskyctl proxy com.atproto.repo.uploadBlob --input cat.jpg \\
                --content-type image/jpeg
            """)

    @Argument(help: ArgumentHelp("The XRPC method, e.g. app.bsky.feed.getTimeline.", valueName: "nsid"))
    var nsid: String

    @Option(
        name: .customLong("param"),
        help: ArgumentHelp("A query parameter; repeat a key to send several values. Values are sent as strings.", valueName: "key=value"))
    var parameters: [String] = []

    @Option(help: ArgumentHelp("The request body from FILE, or - for stdin. JSON unless --content-type says otherwise.", valueName: "file|-"))
    var input: String?

    @Option(help: ArgumentHelp("The content type of --input; anything but application/json is sent as raw bytes.", valueName: "type"))
    var contentType: String?

    @Option(help: ArgumentHelp("The account to call as: UUID, DID or handle (default: the default account).", valueName: "account"))
    var account: String?

    @Flag(help: "Force GET (--query) or POST (--procedure), for NSIDs blueskyd's Lexicons do not know.")
    var kind: KindFlag?

    @Option(
        name: .customLong("atproto-proxy"),
        help: ArgumentHelp("Ask the PDS to forward the call to a service (the atproto-proxy header).", valueName: "did#service"))
    var atprotoProxy: String?

    @Option(help: ArgumentHelp("Write the output to FILE instead of stdout.", valueName: "file"))
    var output: String?

    @OptionGroup var connection: ConnectionOptions
    @OptionGroup var format: OutputOptions

    enum KindFlag: String, EnumerableFlag {
        case query, procedure
    }

    func validate() throws {
        guard !nsid.isEmpty, !nsid.hasPrefix("-") else { throw ValidationError("give the XRPC method's NSID") }
        if let atprotoProxy, !atprotoProxy.contains("#") {
            throw ValidationError("--atproto-proxy must look like did:web:api.bsky.chat#bsky_chat")
        }
    }

    func run() throws {
        let request = XRPCCallRequest(
            nsid: nsid, parameters: parameters, input: try readInput(), contentType: contentType,
            account: account, kind: kind.flatMap { XRPCKind(rawValue: $0.rawValue) }, atprotoProxy: atprotoProxy)
        let params = try request.rpcParams()
        let result = try connection.connect()
            .call("xrpc.call", params, context: RequestContext(account: account))

        let bytes = format.json ? Array((result.prettyPrinted + "\n").utf8) : try XRPCResultOutput.bodyBytes(of: result)
        let errorLine = XRPCResultOutput.errorLine(for: result)
        // An error's body is already summed up in the error line; --json still gets the data.
        if errorLine == nil || format.json { try emit(bytes) }
        if let errorLine { throw CtlFailure.requestFailed(errorLine) }
    }

    private func readInput() throws(CtlFailure) -> [UInt8]? {
        guard let input else { return nil }
        if input == "-" { return StandardInput.readAll() }
        guard let data = FileManager.default.contents(atPath: input) else {
            throw .usage("cannot read --input \(input)")
        }
        return Array(data)
    }

    private func emit(_ bytes: [UInt8]) throws(CtlFailure) {
        guard let output, output != "-" else { return Console.writeOut(bytes) }
        guard FileManager.default.createFile(atPath: output, contents: Data(bytes)) else {
            throw .usage("cannot write --output \(output)")
        }
    }
}
