/// Runs `body`, then awaits `tearDown`, whether `body` returned or threw: a `defer` that can
/// await. Tests stop what they started (daemons, testbeds, servers, HTTP clients) through this
/// or a scoped helper built on it (`EndToEndFixture.with`), never with `defer { Task { … } }`,
/// whose unawaited task lets a failing test leave its processes running into the next test.
///
///     let daemon = try await DaemonProcess(directory: directory.path, testbed: nil)
///     try await withTearDown { await daemon.stop() } run: {
///         …
///     }
@discardableResult
public func withTearDown<Result>(
    _ tearDown: () async -> Void,
    isolation: isolated (any Actor)? = #isolation,
    run body: () async throws -> Result
) async rethrows -> Result {
    let result: Result
    do {
        result = try await body()
    } catch {
        await tearDown()
        throw error
    }
    await tearDown()
    return result
}
