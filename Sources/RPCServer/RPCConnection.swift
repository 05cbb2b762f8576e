import JSONRPC
import Logging
import NIOCore

/// Serves one accepted connection: reads lines, runs their requests concurrently, writes the
/// replies in request order, and closes when the client is done (or was refused).
struct RPCConnection: Sendable {
    let channel: NIOAsyncChannel<ByteBuffer, Never>
    let id: UInt64
    /// Nil when the peer's credentials could not be read (such a peer is refused).
    let peer: PeerCredentials?
    let handler: any RPCMethodHandler
    let configuration: RPCServer.Configuration
    /// Shared by every connection of the server.
    let requestBytes: RequestByteBudget
    let logger: Logger

    /// Never throws: every failure ends this connection only.
    func serve() async {
        var logger = logger
        logger[metadataKey: "rpc.connection"] = "\(id)"
        if let peer {
            logger[metadataKey: "peer.pid"] = "\(peer.pid)"
            logger[metadataKey: "peer.uid"] = "\(peer.uid)"
        }
        do {
            try await channel.executeThenClose { inbound in
                guard let peer, peer.uid == configuration.allowedUID else {
                    logger.warning("refused a connection from another user", metadata: [
                        "allowed.uid": "\(configuration.allowedUID)",
                    ])
                    let refusal = RPCResponse(id: .null, outcome: .failure(.permissionDenied))
                    try await write(RPCOutbound.line(for: refusal))
                    return
                }
                logger.debug("connection opened")
                let outlet = RPCStreamOutlet()
                let context = RPCCallContext(connectionID: id, peer: peer, streams: outlet)
                await exchange(inbound, context: context, outlet: outlet, logger: logger)
            }
            logger.debug("connection closed")
        } catch {
            logger.warning("connection failed", metadata: ["error": "\(error)"])
        }
    }

    private func exchange(
        _ inbound: NIOAsyncChannelInboundStream<ByteBuffer>, context: RPCCallContext, outlet: RPCStreamOutlet,
        logger: Logger
    ) async {
        let queue = OrderedReplyQueue(capacity: configuration.maxConcurrentRequestsPerConnection)
        let dispatcher = RPCDispatcher(
            handler: handler, context: context,
            batchConcurrency: configuration.maxConcurrentRequestsPerConnection)
        // A discarding group: a long-lived connection must not accumulate finished children.
        await withDiscardingTaskGroup { group in
            group.addTask {
                do {
                    while let reply = await queue.nextReply() { try await send(reply, outlet: outlet) }
                    // Input ended with a stream open: it goes on until it ends or the client goes.
                    await outlet.waitUntilStreamDone()
                } catch {
                    writingFailed(error, queue: queue, logger: logger)
                }
                outlet.close()
            }
            group.addTask { await pumpNotifications(outlet: outlet, queue: queue, logger: logger) }
            var framer = LineFramer(maxLineBytes: configuration.maxLineBytes)
            do {
                reading: for try await buffer in inbound {
                    for event in framer.append(buffer.readableBytesView) {
                        guard await submit(event, queue: queue, dispatcher: dispatcher, outlet: outlet, logger: logger,
                                           group: &group) else {
                            break reading
                        }
                    }
                }
                if let last = framer.finish() {
                    _ = await submit(last, queue: queue, dispatcher: dispatcher, outlet: outlet, logger: logger, group: &group)
                }
            } catch {
                logger.debug("reading from the connection failed", metadata: ["error": "\(error)"])
            }
            // Half-close or end of input: the writer still sends every outstanding reply.
            queue.finishTakingTickets()
        }
    }

    /// Starts answering one framed line; false when the connection is being torn down.
    private func submit(
        _ event: LineFramer.Event, queue: OrderedReplyQueue, dispatcher: RPCDispatcher, outlet: RPCStreamOutlet,
        logger: Logger, group: inout DiscardingTaskGroup
    ) async -> Bool {
        switch event {
        case .tooLong:
            guard let ticket = await queue.takeTicket() else { return false }
            let response = RPCInbound.lineTooLongResponse(maxLineBytes: configuration.maxLineBytes)
            queue.complete(ticket, with: .line(RPCOutbound.line(for: response)))
        case .line(let line):
            // Blank lines carry nothing (as in NDJSON): skip them rather than answer ParseError.
            if line.allSatisfy(Self.isJSONWhitespace) { return true }
            // Held from now until the reply is queued: past the budget, this reader waits.
            guard await requestBytes.acquire(line.count) else { return false }
            guard let ticket = await queue.takeTicket() else {
                requestBytes.release(line.count)
                return false
            }
            let requestBytes = self.requestBytes
            // Started at once on this task's thread (the connection's event loop), running until
            // its first wait: no pass through the loop's queue before the request is even parsed.
            group.addImmediateTask {
                let reply = await dispatcher.reply(to: line, position: RPCRequestPosition(line: ticket))
                // The writer waiting idle: this request writes its reply itself (and any due
                // after it), sparing the writer's wake-up.
                var due = queue.completeAndTakeTurn(ticket, with: reply)
                while !due.isEmpty {
                    do {
                        for reply in due { try await send(reply, outlet: outlet) }
                    } catch {
                        writingFailed(error, queue: queue, logger: logger)
                        outlet.close()
                    }
                    due = queue.finishWriting()
                }
                requestBytes.release(line.count)
            }
        }
        return true
    }

    /// Writes the connection's notification streams, one after another, until it closes.
    private func pumpNotifications(outlet: RPCStreamOutlet, queue: OrderedReplyQueue, logger: Logger) async {
        while let stream = await outlet.nextStartedStream() {
            do {
                while let lines = await stream.nextLines() {
                    // One buffer and one flush per batch (a `since` replay is up to 16,384 lines).
                    var batch = ByteBuffer()
                    batch.reserveCapacity(lines.reduce(0) { $0 + $1.count })
                    for line in lines { batch.writeBytes(line) }
                    try await channel.channel.writeAndFlush(batch)
                }
                outlet.streamFinished(stream)
            } catch {
                logger.debug("writing a notification failed", metadata: ["error": "\(error)"])
                stream.cancel()
                outlet.streamFinished(stream)
                queue.abort()
                outlet.close()
            }
        }
    }

    /// Writes one reply (nothing for a notification's) and tells the outlet: a stream its
    /// request started goes out after it. The writer and a request holding its turn both send so.
    private func send(_ reply: OrderedReplyQueue.Reply, outlet: RPCStreamOutlet) async throws {
        if case .line(let bytes) = reply { try await write(bytes) }
        outlet.replyWritten()
    }

    /// The client is gone: stop reading and drop the replies still being computed.
    private func writingFailed(_ error: any Error, queue: OrderedReplyQueue, logger: Logger) {
        logger.debug("writing to the connection failed", metadata: ["error": "\(error)"])
        queue.abort()
    }

    /// Waits until the bytes reached the socket: a client that does not read holds up only
    /// its own writer (and through the queue, its own reader).
    private func write(_ bytes: [UInt8]) async throws {
        try await channel.channel.writeAndFlush(ByteBuffer(bytes: bytes))
    }

    private static func isJSONWhitespace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D
    }
}
