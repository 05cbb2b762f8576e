import DaemonHarness

/// Why a section of the benchmark could not run, in one line for the report.
enum BenchError: Error, CustomStringConvertible {
    case upstreamFailed(String)
    case loginFailed(String)
    case oauthLoginFailed(String)
    case daemonFailed(String)
    case unexpectedReply(String)
    case connectionFailed(String)
    case storeFailed(String)

    var description: String {
        switch self {
        case .upstreamFailed(let reason): "the testbed PDS did not start: \(reason)"
        case .loginFailed(let reason): "createSession at the testbed PDS failed: \(reason)"
        case .oauthLoginFailed(let reason): "OAuth login at the testbed failed: \(reason)"
        case .daemonFailed(let reason): "blueskyd failed: \(reason)"
        case .unexpectedReply(let reason): "unexpected reply: \(reason)"
        case .connectionFailed(let reason): "cannot connect: \(reason)"
        case .storeFailed(let reason): "cannot prepare the account store: \(reason)"
        }
    }
}

/// One line for any error: ours and the libraries' typed errors describe themselves. A daemon
/// that died is described by its first line and the last line of its log (usually the reason).
func describe(_ error: any Error) -> String {
    let lines = String(describing: error).split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
    guard let first = lines.first else { return "unknown error" }
    if error is DaemonProcessError, lines.count > 1, let last = lines.last(where: { !$0.isEmpty }), last != first {
        return "\(first) … \(last)"
    }
    return first
}
