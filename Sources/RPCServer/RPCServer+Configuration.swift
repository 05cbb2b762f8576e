import NIOCore
import NIOPosix
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension RPCServer {
    /// Limits and policies of the server; the defaults suit the daemon.
    public struct Configuration: Sendable {
        /// The longest request line accepted; longer lines get a `LineTooLong` error.
        public var maxLineBytes: Int = 1 << 20
        /// Requests of one connection run concurrently up to this many. It also bounds the
        /// replies a connection may have waiting: past it the server stops reading from that
        /// client until it reads its replies.
        public var maxConcurrentRequestsPerConnection: Int = 32
        /// Request lines held at once across all connections, from reading to the reply; past
        /// it the server reads no more until replies free some. Nil: four times `maxLineBytes`.
        public var maxBufferedRequestBytes: Int?
        /// The only uid served; any other peer gets one `PermissionDenied` line.
        public var allowedUID: UInt32 = UInt32(getuid())
        /// How long requests in flight may run after shutdown begins before connections are
        /// closed and their handlers cancelled.
        public var shutdownGracePeriod: Duration = .seconds(5)
        /// The event loops serving the socket.
        public var eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton

        public init() {}

        public init(
            maxLineBytes: Int = 1 << 20,
            maxConcurrentRequestsPerConnection: Int = 32,
            allowedUID: UInt32 = UInt32(getuid()),
            shutdownGracePeriod: Duration = .seconds(5)
        ) {
            precondition(maxLineBytes > 0 && maxConcurrentRequestsPerConnection > 0)
            self.maxLineBytes = maxLineBytes
            self.maxConcurrentRequestsPerConnection = maxConcurrentRequestsPerConnection
            self.allowedUID = allowedUID
            self.shutdownGracePeriod = shutdownGracePeriod
        }
    }

    /// Where the server listens.
    public enum Listener: Sendable, Hashable {
        /// A socket the server creates (and removes on shutdown).
        case path(String)
        /// An already bound and listening socket handed over, e.g. by systemd socket activation.
        case inheritedDescriptor(Int32)
    }
}

extension RPCServer.Configuration {
    /// `maxBufferedRequestBytes`, or its default, never below one maximum-size line.
    var effectiveMaxBufferedRequestBytes: Int {
        let fourLines = maxLineBytes.multipliedReportingOverflow(by: 4)
        return max(maxBufferedRequestBytes ?? (fourLines.overflow ? Int.max : fourLines.partialValue), maxLineBytes)
    }
}
