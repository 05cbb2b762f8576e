import Foundation
import JSONRPC
import RPCServer

/// Methods for the server tests:
/// - `echo`: returns its params (or null);
/// - `wait` `{"latch": name}`: returns name once the test opens that latch;
/// - `sleep` `{"ms": n}`: returns n after n milliseconds (to vary completion order);
/// - `whoami`: the caller's uid, pid and connection id;
/// - `fail`: an InvalidParams error naming field "x".
/// Every request's completion (by `params.tag` or method) is recorded, in order.
final class TestHandler: RPCMethodHandler {
    let latches = LatchSet()
    let events = EventLog()

    func handle(_ request: RPCRequest, context: RPCCallContext) async -> Result<JSONValue, RPCError> {
        let tag = request.params?["tag"]?.stringValue ?? request.method
        events.record("started:\(tag)")
        defer { events.record("finished:\(tag)") }
        switch request.method {
        case "echo":
            return .success(request.params ?? .null)
        case "wait":
            guard let name = request.params?["latch"]?.stringValue else {
                return .failure(.invalidParams("latch is required", field: "latch"))
            }
            await latches.wait(name)
            return .success(.string(name))
        case "sleep":
            let milliseconds = request.params?["ms"]?.intValue ?? 0
            try? await Task.sleep(for: .milliseconds(milliseconds))
            return .success(.number(Double(milliseconds)))
        case "whoami":
            return .success([
                "uid": .number(Double(context.peer.uid)), "pid": .number(Double(context.peer.pid)),
                "connection": .number(Double(context.connectionID)),
            ])
        case "fail":
            return .failure(.invalidParams("x is wrong", field: "x"))
        default:
            return .failure(.methodNotFound(request.method))
        }
    }
}

/// Named one-shot gates the test opens to let waiting requests finish.
final class LatchSet: @unchecked Sendable {
    private let lock = NSLock()
    private var opened: Set<String> = []
    private var waiters: [String: [CheckedContinuation<Void, Never>]] = [:]

    func wait(_ name: String) async {
        await withCheckedContinuation { continuation in
            let isOpen = lock.withLock {
                if opened.contains(name) { return true }
                waiters[name, default: []].append(continuation)
                return false
            }
            if isOpen { continuation.resume() }
        }
    }

    func open(_ name: String) {
        let waiting = lock.withLock {
            opened.insert(name)
            return waiters.removeValue(forKey: name) ?? []
        }
        waiting.forEach { $0.resume() }
    }
}

/// An ordered record of handler events that tests can wait on.
final class EventLog: @unchecked Sendable {
    private let lock = NSLock()
    private var events: [String] = []
    private var waiters: [(String, CheckedContinuation<Void, Never>)] = []

    var all: [String] { lock.withLock { events } }

    func record(_ event: String) {
        let ready = lock.withLock {
            events.append(event)
            let ready = waiters.filter { $0.0 == event }.map(\.1)
            waiters.removeAll { $0.0 == event }
            return ready
        }
        ready.forEach { $0.resume() }
    }

    /// Returns once `event` has been recorded (immediately if it already was).
    func waitFor(_ event: String) async {
        await withCheckedContinuation { continuation in
            let seen = lock.withLock {
                if events.contains(event) { return true }
                waiters.append((event, continuation))
                return false
            }
            if seen { continuation.resume() }
        }
    }
}
