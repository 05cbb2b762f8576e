import Foundation
import NIOCore
import NIOPosix
import Synchronization

/// A server that accepts connections and never answers: a host that black-holes requests (its
/// TLS handshake, its HTTP) without refusing them. Counts the connections it accepted, so that
/// a test can tell whether anything was sent its way.
public final class BlackHole: Sendable {
    public let port: Int
    private let channel: any Channel
    private let accepted: Counter

    private init(channel: any Channel, accepted: Counter) {
        self.channel = channel
        self.accepted = accepted
        port = channel.localAddress?.port ?? 0
    }

    /// Listens on `host` (an address of this machine) and `port` (0: a free one).
    public static func start(host: String = "127.0.0.1", port: Int = 0) async throws -> BlackHole {
        let accepted = Counter()
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.autoRead, value: false)
            .childChannelInitializer { channel in
                accepted.add(channel)
                return channel.eventLoop.makeSucceededVoidFuture()
            }
            .bind(host: host, port: port)
            .get()
        return BlackHole(channel: channel, accepted: accepted)
    }

    /// Connections accepted so far.
    public var connections: Int { accepted.count }

    public func stop() async {
        try? await channel.close()
        await accepted.closeAll()
    }

    private final class Counter: Sendable {
        private let channels = Mutex<(count: Int, open: [any Channel])>((0, []))
        var count: Int { channels.withLock { $0.count } }
        func add(_ channel: any Channel) { channels.withLock { $0.count += 1; $0.open.append(channel) } }
        func closeAll() async { for channel in channels.withLock({ $0.open }) { try? await channel.close() } }
    }
}
