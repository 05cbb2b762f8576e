import NIOPosix

/// Debug builds stop at a store call made on a NIO event loop: every call waits on the disk
/// (or, with PostgreSQL, on the network, where `EventLoopFuture.wait()` stops even a release
/// build), and a loop that waits stalls every connection it serves. The tests run debug
/// builds of the daemon, so a path that reaches the store from a loop fails them.
@inline(__always)
package func assertOffEventLoop(_ context: @autoclosure () -> String) {
    assert(MultiThreadedEventLoopGroup.currentEventLoop == nil, "a blocking store call on an event loop: \(context())")
}
