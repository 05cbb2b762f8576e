import NIOCore

/// An accepted connection, with who is on the other end.
struct AcceptedConnection: Sendable {
    var channel: NIOAsyncChannel<ByteBuffer, Never>
    var peer: PeerCredentials?
}
