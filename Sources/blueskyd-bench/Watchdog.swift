import DaemonHarness
import Foundation
import Synchronization

/// Keeps the run bounded: after the time limit it kills the child processes it knows of and
/// exits, so `make bench` always stops by itself even if a daemon or the testbed hangs.
enum Watchdog {
    private static let state = Mutex<(armed: Bool, children: Set<Int32>)>((false, []))

    static func arm(seconds: Double) {
        state.withLock { $0.armed = true }
        let thread = Thread {
            Thread.sleep(forTimeInterval: seconds)
            let (armed, children) = state.withLock { ($0.armed, $0.children) }
            guard armed else { return }
            FileHandle.standardError.write(Data("[bench] time limit of \(Int(seconds)) s reached: giving up\n".utf8))
            for pid in children { kill(pid, SIGKILL) }
            exit(3)
        }
        thread.start()
    }

    static func disarm() { state.withLock { $0.armed = false } }

    /// A child to kill if the run has to be abandoned.
    static func track(_ pid: Int32) { _ = state.withLock { $0.children.insert(pid) } }

    static func untrack(_ pid: Int32) { _ = state.withLock { $0.children.remove(pid) } }
}

extension DaemonProcess {
    /// Runs `body` with this daemon known to the watchdog, then stops it, whether `body`
    /// returned or threw.
    func runThenStop<Value>(_ body: () async throws -> Value) async throws -> Value {
        Watchdog.track(pid)
        defer { Watchdog.untrack(pid) }
        do {
            let value = try await body()
            _ = await stop()
            return value
        } catch {
            _ = await stop()
            throw error
        }
    }
}
