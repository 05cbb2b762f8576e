import JSONRPC

/// Runs the methods behind the socket. The server does framing, JSON-RPC validation,
/// batching and reply ordering: a handler only ever sees valid requests (notifications
/// included; their outcome is dropped) and answers `.failure(.methodNotFound(...))` for
/// methods it does not know.
///
/// A handler runs on the connection's event loop (read, handled and answered on one thread, the
/// fastest path), so it must never block a thread: every wait is an `await`.
public protocol RPCMethodHandler: Sendable {
    func handle(_ request: RPCRequest, context: RPCCallContext) async -> Result<JSONValue, RPCError>
}

/// The process at the other end of a connection, from `SO_PEERCRED` (as it was at connect time).
public struct PeerCredentials: Sendable, Hashable, CustomStringConvertible {
    public var pid: Int32
    public var uid: UInt32
    public var gid: UInt32

    public init(pid: Int32, uid: UInt32, gid: UInt32) {
        self.pid = pid
        self.uid = uid
        self.gid = gid
    }

    public var description: String { "pid \(pid), uid \(uid), gid \(gid)" }
}

/// What a handler knows about the connection a request came from.
public struct RPCCallContext: Sendable {
    /// Unique per server run; lets a handler tie requests of one connection together.
    public var connectionID: UInt64
    public var peer: PeerCredentials
    /// Where the request sits in its connection (a stream it starts follows its reply).
    public var position: RPCRequestPosition
    /// The connection's notification stream; nil where there is no connection (tests).
    public var streams: RPCStreamOutlet?

    public init(connectionID: UInt64, peer: PeerCredentials, position: RPCRequestPosition = .init(line: 0),
                streams: RPCStreamOutlet? = nil) {
        self.connectionID = connectionID
        self.peer = peer
        self.position = position
        self.streams = streams
    }
}
