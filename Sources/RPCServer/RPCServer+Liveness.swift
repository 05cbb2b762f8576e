import NIOCore

extension RPCServer {
    /// True when the server is accepting and every event loop serving the socket runs a task
    /// submitted now. A watchdog keep-alive should depend on this: a wedged event loop leaves
    /// the socket open but unserved, which only a probe through the loops notices.
    public func probeLiveness() async -> Bool {
        guard let listener = core.state.withLock({ $0.listeningChannel }) else { return false }
        guard (try? await listener.eventLoop.submit({ listener.isActive }).get()) == true else { return false }
        for loop in configuration.eventLoopGroup.makeIterator() {
            guard (try? await loop.submit({ true }).get()) == true else { return false }
        }
        return true
    }
}
