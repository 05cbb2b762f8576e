import FoundationEssentials

/// bskyctl's exit statuses (the sysexits.h values where one fits), documented in `bskyctl --help`.
public enum ExitStatus: Int32, Sendable, CaseIterable {
    /// Everything worked.
    case success = 0
    /// The request failed: an RPC error from blueskyd, or an XRPC status of 400 or more.
    case requestFailed = 1
    /// The command line was wrong (EX_USAGE).
    case usage = 64
    /// blueskyd is not reachable: no socket, connection refused, or shutting down (EX_UNAVAILABLE).
    case daemonUnavailable = 69
    /// The socket or the daemon refused this user (EX_NOPERM).
    case permissionDenied = 77
}

/// A failure that ends bskyctl with one line on stderr (`bskyctl: <message>`) and an exit status.
public struct CtlFailure: Error, Sendable, Equatable, CustomStringConvertible {
    /// One line for people, without the `bskyctl: ` prefix.
    public var message: String
    public var status: ExitStatus

    public init(_ message: String, status: ExitStatus) {
        self.message = message.singleLine
        self.status = status
    }

    public var description: String { message }

    /// A problem with the command line (exit 64).
    public static func usage(_ message: String) -> CtlFailure {
        CtlFailure(message, status: .usage)
    }

    /// A request that failed (exit 1).
    public static func requestFailed(_ message: String) -> CtlFailure {
        CtlFailure(message, status: .requestFailed)
    }
}

extension String {
    /// The text on one line: a server's multi-line message must not break "one line per error".
    var singleLine: String {
        split(whereSeparator: \.isNewline).map { $0.trimmingSpaces() }
            .filter { !$0.isEmpty }.joined(separator: " ")
    }
}
