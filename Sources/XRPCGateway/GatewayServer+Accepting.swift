import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import RPCServer
#if canImport(Glibc)
import Glibc
#endif

/// An accepted gateway connection, HTTP/1.1 framed, with who is on the other end.
struct AcceptedGatewayConnection: Sendable {
    /// Answers are written on the channel itself, from its event loop, as the JSON-RPC server
    /// writes its replies: no async writer between the answer and the socket.
    var channel: NIOAsyncChannel<HTTPServerRequestPart, Never>
    var peer: PeerCredentials?
    /// On TCP: the client's socket in the kernel's table.
    var loopbackSocket: LoopbackClientSocket?
}

extension GatewayServer {
    /// The loopback client's socket in the kernel's table (read on NIO's blocking pool): its
    /// uid, and its inode, which finds its process when a write needs it (TCP carries no pid);
    /// nil when the table does not show the client.
    static func loopbackSocket(of channel: any Channel) -> EventLoopFuture<LoopbackClientSocket?> {
        guard let client = channel.remoteAddress, let server = channel.localAddress else {
            return channel.eventLoop.makeSucceededFuture(nil)
        }
        return NIOThreadPool.singleton.runIfActive(eventLoop: channel.eventLoop) {
            LoopbackPeerOwner.socket(client: client, server: server)
        }.recover { _ in nil }
    }
}
