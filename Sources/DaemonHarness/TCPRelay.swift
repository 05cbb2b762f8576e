import Foundation
import NIOCore
import NIOPosix
import Synchronization

/// A TCP relay between a client and a server on this machine that can stop forwarding: while
/// `dropping`, everything either side sends is read and thrown away, and new connections are
/// accepted but never joined to the server. To the client the server has gone silent (no
/// reset, no refusal), as when the network drops its packets; `resume` forwards again.
public final class TCPRelay: Sendable {
    /// The address clients connect to.
    public let port: Int
    private let channel: any Channel
    private let state: RelayState

    private init(channel: any Channel, state: RelayState) {
        self.channel = channel
        self.state = state
        port = channel.localAddress?.port ?? 0
    }

    /// A relay on 127.0.0.1 (a free port) to `host:port`.
    public static func start(to host: String, port targetPort: Int) async throws -> TCPRelay {
        let state = RelayState()
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            // Nothing is read before the server side is connected: a client that speaks first
            // (PostgreSQL's do) would otherwise lose its first bytes.
            .childChannelOption(.autoRead, value: false)
            .childChannelInitializer { inbound in
                let client = RelayHandler(state: state)
                return inbound.pipeline.addHandler(client).flatMap {
                    guard !state.isDropping else {
                        state.track(inbound)
                        return inbound.eventLoop.makeSucceededVoidFuture()
                    }
                    return ClientBootstrap(group: inbound.eventLoop)
                        .channelInitializer { outbound in
                            let server = RelayHandler(state: state)
                            server.peer = inbound
                            client.peer = outbound
                            return outbound.pipeline.addHandler(server)
                        }
                        .connect(host: host, port: targetPort)
                        .flatMap { outbound in
                            state.track(inbound)
                            state.track(outbound)
                            return inbound.setOption(.autoRead, value: true)
                        }
                        .flatMapErrorThrowing { error in
                            inbound.close(promise: nil)
                            throw error
                        }
                }
            }
            .bind(host: "127.0.0.1", port: 0)
            .get()
        return TCPRelay(channel: channel, state: state)
    }

    /// Stops forwarding: bytes are dropped, new connections hang.
    public func drop() { state.setDropping(true) }

    /// Forwards again (what was dropped stays lost; connections that hung stay unjoined).
    public func resume() { state.setDropping(false) }

    /// Closes the relay and every connection through it.
    public func stop() async {
        try? await channel.close()
        await state.closeAll()
    }
}

/// What the relay's connections share: whether bytes are dropped, and the open channels.
private final class RelayState: Sendable {
    private let dropping = Atomic(false)
    private let open = Mutex<[ObjectIdentifier: any Channel]>([:])

    var isDropping: Bool { dropping.load(ordering: .acquiring) }

    func setDropping(_ value: Bool) { dropping.store(value, ordering: .releasing) }

    func track(_ channel: any Channel) {
        let id = ObjectIdentifier(channel)
        open.withLock { $0[id] = channel }
        channel.closeFuture.whenComplete { [weak self] _ in self?.open.withLock { _ = $0.removeValue(forKey: id) } }
    }

    func closeAll() async {
        for channel in open.withLock({ Array($0.values) }) { try? await channel.close() }
    }
}

/// One side of a relayed connection: forwards what it reads to its peer, unless dropping;
/// closing one side closes the other.
private final class RelayHandler: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let state: RelayState
    /// The other side; set on the owning event loop before any read is forwarded.
    var peer: (any Channel)?

    init(state: RelayState) {
        self.state = state
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !state.isDropping, let peer else { return }
        peer.writeAndFlush(unwrapInboundIn(data), promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        peer?.close(promise: nil)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}
