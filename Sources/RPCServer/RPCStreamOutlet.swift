import Foundation

/// A connection's one notification stream: a handler starts it, the connection writes it
/// beside the replies, and it ends when the handler stops it, the source ends it, or the
/// connection closes.
///
/// A stream starts only once the reply to the request that started it has been written, so a
/// client always reads "subscribed" before the first notification.
public final class RPCStreamOutlet: @unchecked Sendable {
    private let lock = NSLock()
    private var stream: (any RPCNotificationStream)?
    /// The request after whose reply `stream` starts; nil once it has started.
    private var startsAfter: RPCRequestPosition?
    /// Replies written so far (request lines, in order).
    private var repliesWritten = 0
    private var closed = false
    /// The connection's pump, waiting for a stream to write.
    private var pump: CheckedContinuation<(any RPCNotificationStream)?, Never>?
    /// Waiting until the current stream is done with (`stop()`, the end of the connection).
    private var streamDoneWaiters: [CheckedContinuation<Void, Never>] = []
    /// Run once when the connection closes.
    private var closeActions: [@Sendable () -> Void] = []

    init() {}

    /// Whether a stream is open (started or about to be).
    public var hasStream: Bool { lock.withLock { stream != nil } }

    /// Opens `stream` to start after the reply to `position`. False (and the stream is
    /// cancelled) when the connection is closing or already has a stream.
    public func start(_ stream: any RPCNotificationStream, after position: RPCRequestPosition) -> Bool {
        let (accepted, wake) = lock.withLock { () -> (Bool, Wake?) in
            guard !closed, self.stream == nil else { return (false, nil) }
            self.stream = stream
            startsAfter = position
            return (true, startIfDue())
        }
        guard accepted else {
            stream.cancel()
            return false
        }
        if let (pump, started) = wake { pump.resume(returning: started) }
        return true
    }

    /// Ends the open stream (if any) and returns once nothing more of it will be written.
    public func stop() async {
        let (open, started) = lock.withLock { () -> ((any RPCNotificationStream)?, Bool) in
            let open = stream
            // Not started yet: no pump holds it, so it is simply dropped.
            if open != nil, startsAfter != nil { (stream, startsAfter) = (nil, nil); return (open, false) }
            return (open, true)
        }
        guard let open else { return }
        open.cancel()
        if started { await waitUntilStreamDone() }
    }

    private typealias Wake = (CheckedContinuation<(any RPCNotificationStream)?, Never>, any RPCNotificationStream)

    // MARK: The connection's side

    /// The writer wrote the reply to one more request line.
    func replyWritten() {
        let wake = lock.withLock { () -> Wake? in
            repliesWritten += 1
            return startIfDue()
        }
        if let (pump, started) = wake { pump.resume(returning: started) }
    }

    /// The pump's wait for a started stream; nil once the connection is closing.
    func nextStartedStream() async -> (any RPCNotificationStream)? {
        await withCheckedContinuation { continuation in
            let ready: (any RPCNotificationStream)?? = lock.withLock {
                if closed { return .some(nil) }
                if let stream, startsAfter == nil { return .some(stream) }
                pump = continuation
                return .none
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }

    /// The pump is done with `finished` (it ended, or writing failed).
    func streamFinished(_ finished: any RPCNotificationStream) {
        let waiters = lock.withLock { () -> [CheckedContinuation<Void, Never>] in
            guard stream === finished else { return [] }
            stream = nil
            startsAfter = nil
            defer { streamDoneWaiters = [] }
            return streamDoneWaiters
        }
        waiters.forEach { $0.resume() }
    }

    /// Returns once no stream is open (the end of input leaves an open stream running).
    func waitUntilStreamDone() async {
        await withCheckedContinuation { continuation in
            let done = lock.withLock {
                if stream == nil { return true }
                streamDoneWaiters.append(continuation)
                return false
            }
            if done { continuation.resume() }
        }
    }

    /// Runs `action` when the connection closes (at once if it has): what a request ties to
    /// its connection's life (a gateway token) ends with it, however the client left.
    public func whenClosed(_ action: @escaping @Sendable () -> Void) {
        let runNow = lock.withLock {
            if closed { return true }
            closeActions.append(action)
            return false
        }
        if runNow { action() }
    }

    /// The connection is closing: cancels the stream and releases the pump and every waiter.
    func close() {
        let (cancelled, pump, waiters, actions) = lock.withLock {
            closed = true
            defer { (stream, startsAfter, self.pump, streamDoneWaiters, closeActions) = (nil, nil, nil, [], []) }
            return (stream, self.pump, streamDoneWaiters, closeActions)
        }
        cancelled?.cancel()
        pump?.resume(returning: nil)
        waiters.forEach { $0.resume() }
        actions.forEach { $0() }
    }

    /// Must hold the lock: starts the pending stream once its request's reply is out.
    private func startIfDue() -> Wake? {
        guard let stream, let after = startsAfter, repliesWritten > after.line else { return nil }
        startsAfter = nil
        guard let pump else { return nil }
        self.pump = nil
        return (pump, stream)
    }
}
