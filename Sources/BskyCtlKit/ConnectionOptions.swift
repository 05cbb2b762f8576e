import ArgumentParser
import JSONRPC

/// Options every subcommand takes to reach blueskyd.
struct ConnectionOptions: ParsableArguments {
    @Option(
        name: .long,
        help: ArgumentHelp(
            "The daemon's Unix socket. (default: $BLUESKYD_SOCKET, else $XDG_RUNTIME_DIR/blueskyd/blueskyd.sock, else /tmp/blueskyd-<uid>/blueskyd.sock)",
            valueName: "path"))
    var socket: String?

    @Option(
        name: .long,
        help: ArgumentHelp("Seconds to wait for the daemon's reply.", valueName: "seconds"))
    var timeout: Double = 120

    func validate() throws {
        if let socket, socket.isEmpty { throw ValidationError("--socket needs a path") }
        guard timeout > 0, timeout.isFinite else { throw ValidationError("--timeout must be a positive number of seconds") }
    }

    /// The socket path to use: `--socket`, else the shared default rule.
    var socketPath: String { socket ?? SocketLocation.defaultPath() }

    /// Connects to blueskyd, turning connection failures into bskyctl's exit statuses.
    func connect() throws(CtlFailure) -> DaemonClient {
        try DaemonClient(socketPath: socketPath, timeout: timeout)
    }
}

/// Output options for subcommands whose output is data.
struct OutputOptions: ParsableArguments {
    @Flag(name: .long, help: "Print the daemon's result as JSON (pretty, sorted keys) instead of text.")
    var json = false
}
