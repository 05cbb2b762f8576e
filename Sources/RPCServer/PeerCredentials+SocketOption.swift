import NIOCore
#if canImport(Glibc)
import Glibc
#endif

extension PeerCredentials {
    /// Reads `SO_PEERCRED` from an accepted Unix-socket channel; nil when the platform or the
    /// channel cannot say (such a peer is refused).
    package static func read(from channel: any Channel) -> EventLoopFuture<PeerCredentials?> {
        #if os(Linux)
        guard let provider = channel as? any SocketOptionProvider else {
            return channel.eventLoop.makeSucceededFuture(nil)
        }
        let future: EventLoopFuture<LinuxUcred> = provider.unsafeGetSocketOption(
            level: SocketOptionLevel(SOL_SOCKET), name: SocketOptionName(SO_PEERCRED))
        return future
            .map { Optional(PeerCredentials(pid: $0.pid, uid: $0.uid, gid: $0.gid)) }
            .recover { _ in nil }
        #else
        return channel.eventLoop.makeSucceededFuture(nil)
        #endif
    }
}

#if os(Linux)
/// The layout of Linux's `struct ucred`, which Glibc's Swift overlay does not expose
/// (it sits behind `_GNU_SOURCE`).
private struct LinuxUcred: Sendable {
    var pid: Int32 = 0
    var uid: UInt32 = 0
    var gid: UInt32 = 0
}
#endif
