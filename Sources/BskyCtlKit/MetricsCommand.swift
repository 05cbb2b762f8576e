import ArgumentParser
import FoundationEssentials
import JSONRPC

/// `bskyctl metrics`: the daemon's metrics as Prometheus text, from its metrics socket.
struct MetricsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "metrics",
        abstract: "Print blueskyd's metrics (Prometheus text exposition).",
        discussion: """
            Reads GET /metrics from the metrics socket: metrics.sock beside the daemon's socket unless \
            --metrics-socket names another (metrics_socket in blueskyd.toml).
            """)

    @OptionGroup var connection: ConnectionOptions
    @Option(help: "The metrics socket. (default: metrics.sock beside --socket)") var metricsSocket: String?

    func run() throws {
        let path = metricsSocket ?? (FilePath.directory(of: connection.socketPath) + "/metrics.sock")
        let answer: (status: Int, body: [UInt8])
        do {
            answer = try UnixSocketHTTP.get(path: path, target: "/metrics",
                                            timeout: .milliseconds(Int64((connection.timeout * 1000).rounded())))
        } catch {
            throw DaemonClient.connectionFailure(error, socketPath: path)
        }
        guard answer.status == 200 else {
            throw CtlFailure.requestFailed("the metrics socket \(path) answered \(answer.status)")
        }
        Console.writeOut(answer.body)
    }
}
