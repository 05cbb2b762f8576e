import DaemonHarness
import Foundation
import JSONRPC

/// Section 9: what 100 event subscribers cost. The same daemon, in alternating blocks with no
/// subscriber and with 100 (each reading its stream): `accounts.refresh` calls per second
/// (each one an `account.refreshed` event sent 100 times), and the proxy's latency while
/// events flow.
struct EventsBench {
    static let section = "events"
    static let subscriberCount = 100
    static let rounds = 4
    static let refreshesPerBlock = 60
    static let callsPerBlock = 300

    let options: BenchOptions
    let upstream: UpstreamInfo
    let workDirectory: String
    let progress: ProgressLog

    func run() async throws -> EventsResult {
        let directory = workDirectory + "/events"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        progress.say("events: starting blueskyd with one account")
        let daemon = try await DaemonProcess(directory: directory, testbed: nil,
                                             extraArguments: DaemonArguments.forUpstream(upstream))
        return try await daemon.runThenStop {
            try await daemon.call("accounts.add", ["identifier": .string(upstream.did), "password": .string(upstream.appPassword)])
            return try await measure(socketPath: daemon.socketPath)
        }
    }

    private func measure(socketPath: String) async throws -> EventsResult {
        let did = upstream.did
        return try await offThePool {
            let client = try RPCClientConnection(socketPath: socketPath, timeout: .seconds(60))
            defer { client.close() }
            let refreshRates = try Self.alternatingBlocks(socketPath: socketPath, eventsPerSubscriber: Self.refreshesPerBlock) {
                let start = ContinuousClock.now
                for _ in 0..<Self.refreshesPerBlock {
                    _ = try client.call(method: "accounts.refresh", params: ["account": .string(did), "force": true]).get()
                }
                return Double(Self.refreshesPerBlock) / (ContinuousClock.now - start).inSeconds
            }
            // Latency while a refresh a tenth of a second makes events for the subscribers.
            let generator = try EventGenerator(socketPath: socketPath, did: did)
            defer { generator.stop() }
            let call = BenchRequest.params(did: did)
            let latencies = try Self.alternatingBlocks(socketPath: socketPath, eventsPerSubscriber: 0) {
                try (0..<Self.callsPerBlock).map { _ in
                    let start = ContinuousClock.now
                    let result = try client.call(method: "xrpc.call", params: call).get()
                    guard result["status"]?.intValue == 200 else {
                        throw BenchError.unexpectedReply("xrpc.call returned \(result["status"]?.intValue ?? -1)")
                    }
                    return (ContinuousClock.now - start).microseconds
                }
            }
            return EventsResult(
                subscribers: Self.subscriberCount, refreshesPerBlock: Self.refreshesPerBlock, rounds: Self.rounds,
                refreshRateNone: Statistics.median(refreshRates.none) ?? 0,
                refreshRateWith: Statistics.median(refreshRates.with) ?? 0,
                latencyNone: LatencySummary(latencies.none.flatMap { $0 }),
                latencyWith: LatencySummary(latencies.with.flatMap { $0 }),
                eventsDelivered: refreshRates.delivered + latencies.delivered)
        }
    }

    /// Runs `block` in `rounds` blocks with no subscriber and as many with `subscriberCount`
    /// reading their streams, alternating which side goes first. Each side's results, and the
    /// events the subscribers read (each waits for `eventsPerSubscriber` before it is closed).
    private static func alternatingBlocks<Value>(socketPath: String, eventsPerSubscriber: Int,
                                                 _ block: () throws -> Value) throws
        -> (none: [Value], with: [Value], delivered: Int)
    {
        var results: (none: [Value], with: [Value], delivered: Int) = ([], [], 0)
        for round in 0..<rounds {
            for withSubscribers in round % 2 == 0 ? [false, true] : [true, false] {
                guard withSubscribers else {
                    results.none.append(try block())
                    continue
                }
                let readers = try EventReaders(socketPath: socketPath, count: subscriberCount)
                results.with.append(try block())
                results.delivered += readers.stop(expectingAtLeast: eventsPerSubscriber)
            }
        }
        return results
    }
}

/// Subscribers that read their streams, all on one thread waiting with poll(2), so that the
/// clients' own cost on this machine's few CPUs stays small beside the daemon's.
final class EventReaders: @unchecked Sendable {
    private let lock = NSLock()
    private var stopping = false
    private var newlinesSeen: [Int]
    private let connections: [RPCClientConnection]
    private let done = DispatchSemaphore(value: 0)

    init(socketPath: String, count: Int) throws {
        newlinesSeen = Array(repeating: 0, count: count)
        connections = try (0..<count).map { _ in
            let connection = try RPCClientConnection(socketPath: socketPath, timeout: .seconds(10))
            _ = try connection.call(method: "events.subscribe", params: ["kinds": ["account.refreshed"]]).get()
            return connection
        }
        let descriptors = connections.map(\.fileDescriptor)
        Thread { [self] in
            defer { done.signal() }
            var polled = descriptors.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
            var buffer = [UInt8](repeating: 0, count: 64 * 1024)
            while !lock.withLock({ stopping }) {
                guard poll(&polled, nfds_t(polled.count), 100) > 0 else { continue }
                for index in polled.indices where polled[index].revents != 0 {
                    let received = buffer.withUnsafeMutableBytes { recv(polled[index].fd, $0.baseAddress, $0.count, 0) }
                    guard received > 0 else { polled[index].fd = -1; continue }
                    let count = buffer[..<received].reduce(0) { $0 + ($1 == 0x0A ? 1 : 0) }
                    lock.withLock { newlinesSeen[index] += count }
                }
            }
        }.start()
    }

    /// Ends the block: waits until every subscriber has read the events of its refreshes,
    /// closes them all and returns how many events they read in all.
    func stop(expectingAtLeast minimum: Int) -> Int {
        let deadline = Date().addingTimeInterval(10)
        while lock.withLock({ newlinesSeen.min() ?? 0 }) < minimum, Date() < deadline { usleep(1_000) }
        lock.withLock { stopping = true }
        done.wait()
        connections.forEach { $0.close() }
        return lock.withLock { newlinesSeen.reduce(0, +) }
    }
}

/// Makes one `account.refreshed` event every tenth of a second, on a connection of its own.
final class EventGenerator: @unchecked Sendable {
    private let lock = NSLock()
    private var stopping = false
    private let finished = DispatchSemaphore(value: 0)

    init(socketPath: String, did: String) throws {
        nonisolated(unsafe) let connection = try RPCClientConnection(socketPath: socketPath, timeout: .seconds(60))
        Thread { [self] in
            defer { finished.signal() }
            while !lock.withLock({ stopping }) {
                _ = try? connection.call(method: "accounts.refresh", params: ["account": .string(did), "force": true])
                usleep(100_000)
            }
            connection.close()
        }.start()
    }

    func stop() {
        lock.withLock { stopping = true }
        finished.wait()
    }
}

struct EventsResult: Codable, Sendable {
    var subscribers: Int
    var refreshesPerBlock: Int
    var rounds: Int
    /// Median `accounts.refresh` calls per second over the blocks without / with subscribers.
    var refreshRateNone: Double
    var refreshRateWith: Double
    var latencyNone: LatencySummary?
    var latencyWith: LatencySummary?
    var eventsDelivered: Int

    var refreshRatio: Double { refreshRateNone > 0 ? refreshRateWith / refreshRateNone : 0 }
    var addedP50: Double? {
        guard let none = latencyNone, let with = latencyWith else { return nil }
        return with.p50 - none.p50
    }

    func lines() -> [String] {
        var lines = ["9. Events: \(subscribers) subscribers against none, alternating blocks in one run"]
        lines.append("   accounts.refresh/s (median of \(rounds) blocks of \(refreshesPerBlock) each side): none \(format(refreshRateNone, 1)), "
                     + "with \(subscribers) subscribers \(format(refreshRateWith, 1)) (ratio \(format(refreshRatio, 3)))")
        if let none = latencyNone, let with = latencyWith, let added = addedP50 {
            lines.append("   xrpc.call latency while events flow (µs)   p50       p90       p99")
            lines.append("     no subscriber                         \(pad(format(none.p50, 0), 9)) \(pad(format(none.p90, 0), 9)) \(format(none.p99, 0))")
            lines.append("     \(subscribers) subscribers                       \(pad(format(with.p50, 0), 9)) \(pad(format(with.p90, 0), 9)) \(format(with.p99, 0))")
            lines.append("   p50 difference: \(format(added, 1)) µs; events delivered to subscribers: \(eventsDelivered)")
        }
        return lines
    }
}
