/// Lines a handler sends on its connection besides replies: JSON-RPC notifications such as
/// blueskyd's events.
///
/// The connection writes what `nextLines()` returns, one call at a time, and waits for each
/// write to reach the socket before asking again: a client that does not read holds up only
/// its own stream, whose source decides what to keep meanwhile (and must bound it).
public protocol RPCNotificationStream: AnyObject, Sendable {
    /// The next lines to send, each one whole message ending in `\n`; waits until there are
    /// some, and returns nil once the stream has ended.
    func nextLines() async -> [[UInt8]]?

    /// Ends the stream for good: the connection closed, or its handler replaced or ended it.
    /// Lines still buffered are dropped. Called at most once per stream, on any thread.
    func cancel()
}

/// Where a request sits in its connection: the stream a handler starts begins after this
/// request's reply (a reply is written in request order), never before it.
public struct RPCRequestPosition: Sendable, Hashable {
    /// Counts request lines (a batch is one) from 0 on each connection.
    public var line: Int

    public init(line: Int) {
        self.line = line
    }
}
