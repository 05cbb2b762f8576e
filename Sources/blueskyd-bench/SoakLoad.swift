import Foundation
import NIOCore

/// An open-loop load of proxied calls at a steady rate: calls are sent when their time comes,
/// whether or not earlier ones were answered (a slow refresh must not slow the load down and
/// hide itself), round-robin over the accounts and the socket connections, each connection
/// pipelining its calls (blueskyd answers in order on each).
struct SoakLoad {
    /// More calls than this waiting for replies means blueskyd has stalled: further calls are
    /// counted as skipped instead of piling up without bound.
    static let backlogLimit = 2_000
    /// How often the pacing loop wakes up to send the calls that fell due.
    static let tick: Duration = .milliseconds(10)

    let connections: [SoakConnection]
    /// One `xrpc.call` request line per account, newline-terminated.
    let requestLines: [ByteBuffer]
    let callsPerSecond: Double
    let tally: SoakTally

    /// Sends calls at the rate until `deadline` (or cancellation), then waits (up to `drain`) for the replies.
    func run(until deadline: ContinuousClock.Instant, drain: Duration = .seconds(30)) async {
        let start = ContinuousClock.now
        var sent = 0
        while ContinuousClock.now < deadline, !Task.isCancelled {
            let due = Int((ContinuousClock.now - start).inSeconds * callsPerSecond)
            while sent < due {
                let connection = connections[sent % connections.count]
                let line = requestLines[sent % requestLines.count]
                sent += 1
                if tally.inFlight.load(ordering: .relaxed) >= Self.backlogLimit {
                    tally.skipped()
                    continue
                }
                connection.call(line, tally: tally)
            }
            try? await Task.sleep(for: Self.tick)
        }
        let drainEnd = ContinuousClock.now + drain
        while tally.inFlight.load(ordering: .relaxed) > 0, ContinuousClock.now < drainEnd, !Task.isCancelled {
            try? await Task.sleep(for: .milliseconds(50))
        }
    }
}

/// One socket connection of the soak: each call's reply is classified and counted.
struct SoakConnection: Sendable {
    let channel: any Channel

    static func connect(socketPath: String, group: any EventLoopGroup) async throws -> SoakConnection {
        SoakConnection(channel: try await ReplyLineHandler.connect(socketPath: socketPath, group: group))
    }

    func call(_ line: ByteBuffer, tally: SoakTally) {
        let sentAt = ContinuousClock.now
        tally.sent()
        ReplyLineHandler.call(line, on: channel).whenComplete { result in
            let milliseconds = (ContinuousClock.now - sentAt).inSeconds * 1000
            switch result {
            case .success(let buffer):
                tally.record(SoakOutcome.classify(buffer), milliseconds: milliseconds)
            case .failure(let error):
                tally.record(.failedOtherwise(reason: "connection: \(describe(error))"), milliseconds: milliseconds)
            }
        }
    }

    func close() async {
        try? await channel.close()
    }
}
