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
}

extension GatewayServer {
    /// The loopback client's uid, from the kernel's socket table (read on NIO's blocking pool);
    /// no pid (TCP does not carry one), and nil when the table does not show the client.
    static func loopbackPeer(of channel: any Channel) -> EventLoopFuture<PeerCredentials?> {
        guard let client = channel.remoteAddress, let server = channel.localAddress else {
            return channel.eventLoop.makeSucceededFuture(nil)
        }
        return NIOThreadPool.singleton.runIfActive(eventLoop: channel.eventLoop) {
            LoopbackPeerOwner.uid(client: client, server: server).map { PeerCredentials(pid: 0, uid: $0, gid: 0) }
        }.recover { _ in nil }
    }
}
