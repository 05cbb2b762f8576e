import ArgumentParser
import Dispatch
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import JSONRPC

/// `bskyctl exec`: runs a program with the XRPC gateway as its PDS and a local token of its own
/// (aws-vault's `exec`, for atproto). The program never sees an atproto token or a password.
struct ExecCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "exec",
        abstract: "Run a program against blueskyd's XRPC gateway, with a gateway token that ends when it exits.",
        discussion: """
            The program gets ATPROTO_PDS_URL (and ATP_PDS_HOST) set to the gateway with its token in \
            the path (http://127.0.0.1:<port>/t/<token>, or http://localhost/t/<token> with \
            BLUESKYD_XRPC_SOCKET, a socket of its own that blueskyd makes for it and removes when it \
            exits, where its policy holds with or without the token), and BLUESKYD_GATEWAY_TOKEN for \
            `Authorization: Bearer`. It is never told the main sockets or the token file; without \
            --sandbox a program of the same user can still find them (and anything else the user \
            can reach). With --sandbox (bubblewrap) it sees only the system read-only (/usr, /etc, \
            /opt), its working directory read-only, what --readable and --writable name, a private \
            /tmp and its own socket: no home, no other socket, no network, its own process \
            namespace; its ATPROTO_PDS_URL is then http://127.0.0.1:9583/t/<token> on the \
            sandbox's own loopback, carried to its socket by socat. With one --account, BLUESKYD_HTTP_URL is that account's base URL \
            for an OAuth 2.0 server's account (<gateway>/t/<token>/http/<account>: a Mastodon SDK's \
            API base URL). The token is random bytes, never a JWT; it is held to --policy and \
            --account and revoked when the program exits (or bskyctl is killed). bskyctl exits with \
            the program's status.

            Example: bskyctl exec --policy "read repo:app.bsky.feed.post?action=create" -- ./post.py
            """)

    @OptionGroup var connection: ConnectionOptions
    @Option(name: .long, help: ArgumentHelp("An account the program may use (UUID, DID or handle); repeat for several. (default: any)",
                                            valueName: "account"))
    var account: [String] = []
    @Option(name: .long, help: ArgumentHelp(
        "What the program may do, in atproto's permission syntax (space-separated), e.g. \"read blob:image/* repo:app.bsky.feed.post?action=create\". (default: everything the account's session allows)",
        valueName: "permissions"))
    var policy: String?
    @Flag(name: .long, help: "Run the program under bubblewrap (bwrap): the system read-only, its working directory read-only, a private /tmp, its own socket; no other socket, no home, no network.")
    var sandbox = false
    @Option(name: .long, help: ArgumentHelp("With --sandbox: a directory (or file) the program may write; repeatable.", valueName: "path"))
    var writable: [String] = []
    @Option(name: .long, help: ArgumentHelp("With --sandbox: a directory (or file) the program may read; repeatable.", valueName: "path"))
    var readable: [String] = []
    @Argument(parsing: .captureForPassthrough, help: ArgumentHelp("The program and its arguments (after --).", valueName: "program"))
    var command: [String] = []

    func validate() throws {
        let program = command.first == "--" ? Array(command.dropFirst()) : command
        guard !program.isEmpty else { throw ValidationError("name the program to run: bskyctl exec [options] -- program [args...]") }
        if !sandbox, !(writable.isEmpty && readable.isEmpty) {
            throw ValidationError("--writable and --readable shape the sandbox: give --sandbox too")
        }
        // An option bskyctl does not know, before `--`, is a mistake, not a program's name.
        if command.first != "--", let first = command.first, first.hasPrefix("-") {
            throw ValidationError("unknown option '\(first)' for exec (the program goes after --: bskyctl exec [options] -- program [args...])")
        }
    }

    func run() throws {
        let program = command.first == "--" ? Array(command.dropFirst()) : command
        let client = try connection.connect()
        var params: [String: JSONValue] = ["program": .string(FilePath.lastComponent(program[0]))]
        if let policy { params["policy"] = .string(policy) }
        if !account.isEmpty { params["accounts"] = .array(account.map(JSONValue.string)) }
        let issued = try client.call("gateway.issueToken", .object(params))
        guard let token = issued["token"]?.stringValue else { throw CtlFailure.requestFailed("blueskyd issued no token") }
        // The program's own socket; a daemon too old to make one leaves the main socket.
        let socket = issued["execSocket"]?.stringValue ?? issued["gatewaySocket"]?.stringValue
        // In the sandbox, whose network is its own, a forwarder on its loopback carries TCP to
        // the program's socket: any SDK takes the gateway's URL.
        let url = sandbox ? (Sandbox.bridge(environment: ProcessInfo.processInfo.environment) != nil ? Sandbox.bridgeURL : nil)
            : issued["gatewayURL"]?.stringValue
        guard socket != nil || url != nil else {
            throw CtlFailure.requestFailed("blueskyd serves no XRPC gateway (gateway_socket = \"\" and no gateway_listen)")
        }
        var environment = ProcessInfo.processInfo.environment
        // Nothing that names a main socket goes to the program.
        environment["BLUESKYD_SOCKET"] = nil
        let base = (url ?? "http://localhost") + "/t/" + token
        environment["ATPROTO_PDS_URL"] = base
        environment["ATP_PDS_HOST"] = base
        environment["BLUESKYD_GATEWAY_TOKEN"] = token
        environment["BLUESKYD_XRPC_SOCKET"] = socket
        // One account named: the base URL of its calls when it is an OAuth 2.0 server's account
        // (what a Mastodon SDK takes as its API base URL).
        if account.count == 1 {
            environment["BLUESKYD_HTTP_URL"] = base + "/http/" + FilePath.encodedSegment(account[0])
        }
        var launched = program
        if sandbox {
            guard let socket, issued["execSocket"]?.stringValue != nil else {
                throw CtlFailure.requestFailed("this blueskyd makes no socket of the program's own, which --sandbox needs: update it")
            }
            let hidden = (issued["hidden"]?.arrayValue ?? []).compactMap(\.stringValue)
            launched = try Sandbox.arguments(program, socket: socket, hidden: hidden,
                                             paths: Sandbox.Paths(writable: writable, readable: readable), environment: environment)
        }
        let status = try Self.runToEnd(launched, environment: environment)
        // The connection's end revokes the token too; saying so first makes it immediate.
        _ = try? client.callForResult("gateway.revokeToken", ["token": .string(token)])
        throw ExitCode(status)
    }

    /// Runs `program` (found on PATH) and returns its exit status (128 + the signal that ended it).
    static func runToEnd(_ program: [String], environment: [String: String]) throws(CtlFailure) -> Int32 {
        // The program starts with default signal handling (bskyctl ignores SIGPIPE and, while
        // it waits, SIGINT: a terminal's Ctrl-C reaches the program itself).
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGINT, SIGPIPE, SIGTERM, SIGQUIT, SIGHUP] { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGDEF))
        let arguments = program.map { strdup($0) } + [nil]
        let variables = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            arguments.forEach { free($0) }
            variables.forEach { free($0) }
        }
        var pid: pid_t = 0
        signal(SIGINT, SIG_IGN)
        let spawned = posix_spawnp(&pid, program[0], nil, &attributes, arguments, variables)
        guard spawned == 0 else {
            throw CtlFailure.requestFailed("cannot run \(program[0]): \(String(cString: strerror(spawned)))")
        }
        // A SIGTERM to bskyctl (systemd stopping a unit) is passed on.
        signal(SIGTERM, SIG_IGN)
        let terminate = DispatchSource.makeSignalSource(signal: SIGTERM, queue: .global())
        terminate.setEventHandler { kill(pid, SIGTERM) }
        terminate.resume()
        defer { terminate.cancel() }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 {
            guard errno == EINTR else { return 1 }
        }
        // WIFEXITED / WEXITSTATUS / WTERMSIG, which Glibc's overlay does not import.
        let signalled = status & 0x7f
        return signalled == 0 ? (status >> 8) & 0xff : 128 + signalled
    }
}
