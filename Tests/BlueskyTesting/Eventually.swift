import Foundation

/// Polls `condition` every 20 ms until it holds or `timeout` runs out; returns whether it held.
public func eventually(timeout: Duration = .seconds(20), _ condition: () async throws -> Bool) async rethrows -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if try await condition() { return true }
        try? await Task.sleep(for: .milliseconds(20))
    }
    return try await condition()
}
