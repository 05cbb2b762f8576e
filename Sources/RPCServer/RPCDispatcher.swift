import JSONRPC

/// Turns one request line into its reply line by way of the method handler.
struct RPCDispatcher: Sendable {
    let handler: any RPCMethodHandler
    var context: RPCCallContext
    /// How many elements of one batch run at the same time.
    let batchConcurrency: Int

    func reply(to line: [UInt8], position: RPCRequestPosition) async -> OrderedReplyQueue.Reply {
        var positioned = self
        positioned.context.position = position
        return await positioned.reply(to: line)
    }

    private func reply(to line: [UInt8]) async -> OrderedReplyQueue.Reply {
        switch RPCInbound.parse(line: line) {
        case .rejected(let response):
            return .line(RPCOutbound.line(for: response))
        case .single(let message):
            guard let response = await response(to: message) else { return .silent }
            return .line(RPCOutbound.line(for: response))
        case .batch(let messages):
            guard let line = RPCOutbound.batchLine(for: await responses(to: messages)) else { return .silent }
            return .line(line)
        }
    }

    /// The reply to one message; nil for a valid notification.
    private func response(to message: ParsedMessage) async -> RPCResponse? {
        switch message {
        case .invalid(let response):
            return response
        case .request(let request):
            let outcome = await handler.handle(request, context: context)
            return request.id.map { RPCResponse(id: $0, outcome: outcome) }
        }
    }

    /// Replies of a batch in the batch's order (JSON-RPC allows any order; ours is stable),
    /// its elements running concurrently, at most `batchConcurrency` at a time.
    private func responses(to messages: [ParsedMessage]) async -> [RPCResponse] {
        var responses = [RPCResponse?](repeating: nil, count: messages.count)
        await withTaskGroup(of: (Int, RPCResponse?).self) { group in
            var next = 0
            while next < messages.count, next < batchConcurrency {
                let index = next
                group.addTask { (index, await response(to: messages[index])) }
                next += 1
            }
            while let (index, finished) = await group.next() {
                responses[index] = finished
                if next < messages.count {
                    let index = next
                    group.addTask { (index, await response(to: messages[index])) }
                    next += 1
                }
            }
        }
        return responses.compactMap { $0 }
    }
}
