import NIOCore
import NIOHTTP1
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// When a request whose kept connection failed may be sent again on another one.
///
/// A server closes an idle keep-alive connection whenever its own timeout says so, and that
/// close can cross our next request on the wire. Sending the request again is harmless when
/// the server cannot have seen it, or when seeing it twice changes nothing; a procedure such
/// as `com.atproto.repo.createRecord` that may have arrived must never be sent twice, since
/// the server would then create the record twice.
extension HTTP1ExchangeFailure {
    /// True when the request may go out once more on a new connection.
    func allowsRetry(of method: HTTPMethod) -> Bool {
        switch self {
        case .notSent: true
        case .closedBeforeResponse: method.isIdempotent
        // An answer had begun (so the server acted on the request), or the failure is ours.
        case .closedMidResponse, .bodyTooLarge, .timedOut, .transport: false
        }
    }
}

extension HTTPMethod {
    /// The methods RFC 9110 (section 9.2.2) calls idempotent: the safe ones and PUT and
    /// DELETE. XRPC queries are GET; XRPC procedures are POST, so never idempotent here.
    var isIdempotent: Bool {
        switch self {
        case .GET, .HEAD, .OPTIONS, .TRACE, .PUT, .DELETE: true
        default: false
        }
    }
}

extension HTTP1ExchangeHandler {
    /// True when the kernel already holds the server's close (FIN) or reset for `channel`,
    /// which the event loop has not read yet: the channel still looks active, but a request
    /// written now would go to a server that is gone. Knowing it before writing makes the
    /// request provably unsent, so even a procedure can go to a new connection.
    ///
    /// False whenever it cannot tell (no TCP socket, not Linux, the option not readable at
    /// once): the request is then written, and a close is judged as possibly received.
    static func peerHasClosed(_ channel: any Channel) -> Bool {
        #if os(Linux)
        guard channel.eventLoop.inEventLoop, let socket = channel as? any SocketOptionProvider else { return false }
        var closed = false
        // On the channel's own loop the option is read right away and the future is complete.
        socket.getTCPInfo().assumeIsolated().whenSuccess { info in
            // 1 is TCP_ESTABLISHED; after the peer's FIN the socket is in CLOSE_WAIT, after a
            // reset in CLOSE.
            closed = info.tcpi_state != 1
        }
        return closed
        #else
        return false
        #endif
    }

    /// An error that means the server reset the connection (rather than our own failure).
    static func isReset(_ error: any Error) -> Bool {
        guard let error = error as? IOError else { return false }
        return error.errnoCode == ECONNRESET || error.errnoCode == EPIPE
    }
}
