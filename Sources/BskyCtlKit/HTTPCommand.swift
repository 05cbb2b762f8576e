import ArgumentParser
import FoundationEssentials
import JSONRPC

/// `bskyctl http`: one call to an OAuth 2.0 server's account through blueskyd (`http.call`).
struct HTTPCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "http",
        abstract: "Make an HTTP call to an OAuth 2.0 server's account (Mastodon, NeoDB…) through blueskyd.",
        discussion: """
            blueskyd adds the account's bearer token and sends the call to the account's own \
            server only; the path is a path on it (/api/v1/…), never a URL. A 401 makes blueskyd \
            refresh the token once and send the call again.

            Prints the response body: JSON pretty-printed, anything else as raw bytes. With \
            --json, prints the whole result: {"status", "contentType", "headers", "body" or \
            "bodyBase64"}. A status of 400 or more prints "bskyctl: error: <status>" on stderr \
            and exits 1.

            Examples:
              bskyctl http GET /api/v1/accounts/verify_credentials --account alice@mastodon.social
              bskyctl http POST /api/v1/statuses --account alice@mastodon.social \\
                --data 'status=Hello' --content-type application/x-www-form-urlencoded
              bskyctl http GET /api/me --account alice@neodb.social
            """)

    @Argument(help: ArgumentHelp("The HTTP method (GET, POST, PUT, PATCH, DELETE…).", valueName: "method"))
    var method: String

    @Argument(help: ArgumentHelp("The path on the account's server, with its query if any (/api/v1/timelines/home?limit=5).", valueName: "path"))
    var path: String

    @Option(help: ArgumentHelp("The account: UUID, issuer#subject or handle (default: the default account).", valueName: "account"))
    var account: String?

    @Option(name: .customLong("header"), help: ArgumentHelp("A request header; repeatable.", valueName: "name: value"))
    var headers: [String] = []

    @Option(help: ArgumentHelp("The request body: text, @FILE, or - for stdin.", valueName: "body"))
    var data: String?

    @Option(help: ArgumentHelp("The body's content type (default: application/json when --data is given).", valueName: "type"))
    var contentType: String?

    @OptionGroup var connection: ConnectionOptions
    @OptionGroup var format: OutputOptions

    func validate() throws {
        guard path.hasPrefix("/") else { throw ValidationError("the path starts with / (a path on the account's server, not a URL)") }
        for header in headers where !header.contains(":") { throw ValidationError("--header takes 'name: value', not '\(header)'") }
    }

    func run() throws {
        var params: [String: JSONValue] = ["method": .string(method.uppercased())]
        let parts = path.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        params["path"] = .string(String(parts[0]))
        if parts.count > 1 { params["query"] = .string(String(parts[1])) }
        if let account { params["account"] = .string(account) }
        var headerFields: [String: JSONValue] = [:]
        for header in headers {
            let pair = header.split(separator: ":", maxSplits: 1)
            headerFields[pair[0].trimmingSpaces()] = .string((pair.count > 1 ? pair[1] : "").trimmingSpaces())
        }
        if let body = try readBody() {
            params["bodyBase64"] = .string(Data(body).base64EncodedString())
            headerFields["content-type"] = .string(contentType ?? "application/json")
        }
        if !headerFields.isEmpty { params["headers"] = .object(headerFields) }
        let result = try connection.connect().call("http.call", .object(params), context: RequestContext(account: account))
        let bytes = format.json ? Array((result.prettyPrinted + "\n").utf8) : try XRPCResultOutput.bodyBytes(of: result)
        let status = result["status"]?.intValue ?? 0
        if status < 400 || format.json { Console.writeOut(bytes) }
        if status >= 400 { throw CtlFailure.requestFailed("error: \(status)") }
    }

    private func readBody() throws(CtlFailure) -> [UInt8]? {
        guard let data else { return nil }
        if data == "-" { return StandardInput.readAll() }
        if data.hasPrefix("@") {
            guard let contents = FileManager.default.contents(atPath: String(data.dropFirst())) else {
                throw .usage("cannot read --data \(data)")
            }
            return Array(contents)
        }
        return Array(data.utf8)
    }
}
