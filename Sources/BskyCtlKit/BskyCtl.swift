import ArgumentParser
import BlueskydVersion
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import JSONRPC

/// The `bskyctl` root command: a thin client of blueskyd's JSON-RPC socket.
public struct BskyCtl: ParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "bskyctl",
        abstract: "Control blueskyd, the daemon that keeps Bluesky accounts signed in and proxies XRPC calls.",
        discussion: """
            bskyctl talks to blueskyd over its Unix socket (JSON-RPC 2.0, see \
            docs/PROTOCOL.md). It never sees or stores tokens itself.

            SOCKET
              --socket PATH, else $BLUESKYD_SOCKET,
              else $XDG_RUNTIME_DIR/blueskyd/blueskyd.sock,
              else /tmp/blueskyd-<uid>/blueskyd.sock.

            ACCOUNTS
              Wherever a command takes an <account>, it may be the account's
              UUID, its DID, or its handle. Where the account is optional,
              the default account is used.

            EXIT STATUS
              0   success
              1   the request failed: blueskyd answered with an error, or an
                  XRPC call returned a status of 400 or more
              64  usage error: bad arguments, options, or input
              69  blueskyd is not reachable: no socket, connection refused,
                  or it is shutting down
              77  permission denied: the socket or the daemon refused this user,
                  or a client policy refused the request (PolicyDenied)
              bskyctl exec exits with its program's status instead.

            Errors are one line on stderr, starting with "bskyctl: ".

            EXAMPLES
              bskyctl login alice.bsky.social --app-password
              bskyctl accounts
              bskyctl proxy app.bsky.actor.getProfile --param actor=alice.bsky.social
              bskyctl call daemon.status
              bskyctl exec --policy "read repo:app.bsky.feed.post" -- ./post.py
            """,
        version: blueskydVersion,
        subcommands: [
            AccountsCommand.self, LoginCommand.self, LogoutCommand.self, UseCommand.self,
            RefreshCommand.self, ProxyCommand.self, CallCommand.self, StatusCommand.self,
            ClientMetadataCommand.self, EventsCommand.self, MetricsCommand.self, ExecCommand.self, HTTPCommand.self,
        ]
    )

    public init() {}
}

/// bskyctl's entry point: parses the command line, runs the command, and exits with
/// the documented status and one error line on stderr.
public enum BskyCtlMain {
    public static func run(arguments: [String]? = nil) -> Never {
        // A daemon that closes the socket mid-write must produce an error, not kill us silently.
        signal(SIGPIPE, SIG_IGN)
        do {
            let given = arguments ?? Array(CommandLine.arguments.dropFirst())
            var command = try BskyCtl.parseAsRoot(movingLeadingConnectionOptions(given))
            try command.run()
            exit(ExitStatus.success.rawValue)
        } catch let code as ExitCode {
            // `bskyctl exec` ends with its program's status, and says nothing more.
            exit(code.rawValue)
        } catch let failure as CtlFailure {
            Console.printError(failure.message)
            exit(failure.status.rawValue)
        } catch {
            exitForParserError(error)
        }
    }

    /// Help and version go to stdout as argument-parser prints them; its errors get our prefix.
    private static func exitForParserError(_ error: any Error) -> Never {
        let code = BskyCtl.exitCode(for: error)
        if code == .success { BskyCtl.exit(withError: error) }
        var message = BskyCtl.fullMessage(for: error)
        if message.hasPrefix("Error: ") { message.removeFirst("Error: ".count) }
        Console.printError(message.trimmingWhitespace())
        exit(code.rawValue)
    }
}
