import ATTestbed
import BlueskyTesting
import Foundation
import JSONRPC
import Testing

/// A raw client of the socket, as a script with socat would be: it sends `events.subscribe`
/// and records every line that follows, parsed, on a thread of its own.
final class EventListener: @unchecked Sendable {
    let reply: JSONValue
    private let connection: RPCClientConnection
    private let lock = NSLock()
    private var messages: [JSONValue] = []
    private var rawLines: [String] = []
    private var ended = false
    private var reading = false

    /// - Parameter reading: false leaves the lines in the socket (a subscriber that does not read)
    ///   until `startReading()`.
    init(socketPath: String, _ params: JSONValue? = nil, reading: Bool = true) throws {
        connection = try RPCClientConnection(socketPath: socketPath, timeout: .seconds(60))
        reply = try connection.call(method: "events.subscribe", params: params).get()
        try connection.waitForeverOnReads()
        if reading { startReading() }
    }

    func startReading() {
        lock.withLock { reading = true }
        let thread = Thread { [self] in
            while let line = try? connection.readLineBytes() {
                let value = try? JSONValue.parse(line)
                lock.withLock {
                    rawLines.append(String(decoding: line, as: UTF8.self))
                    if let value { messages.append(value) }
                }
            }
            lock.withLock { ended = true }
            // Closed here, by the only thread that reads it: closed elsewhere, its number could
            // be reused by another socket while this thread still reads "its" descriptor.
            connection.close()
        }
        thread.start()
    }

    /// Every notification so far: `event` params with their kind, `events.gap` params as
    /// `{"kind": "events.gap", ...}`; other lines (replies) as they are.
    var notifications: [JSONValue] {
        lock.withLock { messages }.map { message in
            guard let method = message["method"]?.stringValue, case .object(var params)? = message["params"] else { return message }
            if method != "event" { params["kind"] = .string(method) }
            return .object(params)
        }
    }

    var lines: [String] { lock.withLock { rawLines } }
    var hasEnded: Bool { lock.withLock { ended } }

    func kinds(of did: String? = nil) -> [String] {
        notifications.filter { did == nil || $0["account"]?["did"]?.stringValue == did }.compactMap { $0["kind"]?.stringValue }
    }

    /// Waits until an event of `kind` (for `did`, when given, and matching `condition`) has
    /// arrived; returns it.
    @discardableResult
    func waitFor(_ kind: String, did: String? = nil, timeout: Duration = .seconds(30),
                 where condition: @escaping @Sendable (JSONValue) -> Bool = { _ in true },
                 sourceLocation: SourceLocation = #_sourceLocation) async throws -> JSONValue {
        let found = await eventually(timeout: timeout) { self.first(kind, did: did, where: condition) != nil }
        guard found, let event = first(kind, did: did, where: condition) else {
            Issue.record("no \(kind) event arrived; got \(kinds())", sourceLocation: sourceLocation)
            throw CancellationError()
        }
        return event
    }

    func first(_ kind: String, did: String? = nil, where condition: (JSONValue) -> Bool = { _ in true }) -> JSONValue? {
        notifications.first {
            $0["kind"]?.stringValue == kind && (did == nil || $0["account"]?["did"]?.stringValue == did) && condition($0)
        }
    }

    func send(_ line: String) throws { try connection.send(rawLine: line) }

    /// Leaves as a client that goes away does: a reading thread is woken by the shutdown and
    /// closes the socket itself.
    func close() {
        if lock.withLock({ reading }) {
            shutdown(connection.fileDescriptor, Int32(SHUT_RDWR))
        } else {
            connection.close()
        }
    }
}
