import Foundation
import JSONRPC

/// Many real socket clients at once, each on its own thread, each pipelining its requests
/// (all lines written before any reply is read).
enum ConcurrentClients {
    struct Outcome: Sendable {
        var replies: [JSONValue]
        var failures: [String]
        var elapsed: Duration
    }

    static func run(socketPath: String, connections: Int, requestsPerConnection: Int,
                    request: @escaping @Sendable (_ connection: Int, _ index: Int) -> JSONValue) async -> Outcome {
        let start = ContinuousClock.now
        let results = await withTaskGroup(of: ([JSONValue], [String]).self) { group in
            for connection in 0..<connections {
                group.addTask {
                    await withCheckedContinuation { continuation in
                        let thread = Thread {
                            continuation.resume(returning: pipelined(socketPath, connection, requestsPerConnection, request))
                        }
                        thread.start()
                    }
                }
            }
            var all: ([JSONValue], [String]) = ([], [])
            for await (replies, failures) in group {
                all.0 += replies
                all.1 += failures
            }
            return all
        }
        return Outcome(replies: results.0, failures: results.1, elapsed: ContinuousClock.now - start)
    }

    private static func pipelined(_ socketPath: String, _ connection: Int, _ count: Int,
                                  _ request: (Int, Int) -> JSONValue) -> ([JSONValue], [String]) {
        do {
            let client = try RPCClientConnection(socketPath: socketPath, timeout: .seconds(60))
            defer { client.close() }
            for index in 0..<count {
                let line = RPCRequest(id: .number(Double(index)), method: "xrpc.call", params: request(connection, index)).json
                try client.send(rawLine: String(decoding: line.encoded(), as: UTF8.self))
            }
            var replies: [JSONValue] = []
            for _ in 0..<count {
                guard let line = try client.readLine() else { return (replies, ["connection \(connection) closed early"]) }
                replies.append(try JSONValue.parse(Array(line.utf8)))
            }
            return (replies, [])
        } catch {
            return ([], ["connection \(connection): \(error)"])
        }
    }
}
