/// Why a section of the benchmark could not run, in one line for the report.
enum BenchError: Error, CustomStringConvertible {
    case upstreamFailed(String)
    case loginFailed(String)
    case daemonFailed(String)
    case unexpectedReply(String)
    case connectionFailed(String)
    case storeFailed(String)

    var description: String {
        switch self {
        case .upstreamFailed(let reason): "the testbed PDS did not start: \(reason)"
        case .loginFailed(let reason): "createSession at the testbed PDS failed: \(reason)"
        case .daemonFailed(let reason): "blueskyd failed: \(reason)"
        case .unexpectedReply(let reason): "unexpected reply: \(reason)"
        case .connectionFailed(let reason): "cannot connect: \(reason)"
        case .storeFailed(let reason): "cannot prepare the account store: \(reason)"
        }
    }
}

/// One line for any error: ours and the libraries' typed errors describe themselves.
func describe(_ error: any Error) -> String {
    String(describing: error).split(separator: "\n").first.map(String.init) ?? "unknown error"
}
