import JSONRPC

/// libFuzzer entry point: one input is a stretch of a client's byte stream on the socket.
///
/// The stream is framed twice, with the daemon's line limit and with a tiny one, fed in
/// input-chosen chunks; both must give the lines a plain split would (`LineFramer`). Each
/// line is then classified (`RPCInbound.parse`), and every request and every error reply it
/// yields must survive being written out (`RPCOutbound`) and read back unchanged.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRPCLine(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let stream = fuzzInput(start, count)
    var random = FuzzRandom(seed: stream)
    let events = frame(stream, maxLineBytes: 1 << 20, random: &random)
    _ = frame(stream, maxLineBytes: random.next(in: 1...24), random: &random)
    // Lines are classified independently: past the first few, more of them in one input only
    // slow the run down. Error replies repeat (every non-JSON line gets the same one): each
    // is checked once.
    var checked: Set<RPCResponse> = []
    let lines = events.compactMap { event -> [UInt8]? in
        if case .line(let line) = event { return line }
        return nil
    }
    for line in lines.prefix(8) {
        checkLine(line, checked: &checked)
    }
    return 0
}

/// Feeds `stream` in random chunks and compares the events with a split on "\n".
private func frame(_ stream: [UInt8], maxLineBytes: Int, random: inout FuzzRandom) -> [LineFramer.Event] {
    var framer = LineFramer(maxLineBytes: maxLineBytes)
    var events: [LineFramer.Event] = []
    var offset = 0
    while offset < stream.count {
        let end = min(stream.count, offset + random.next(in: 1...40))
        events += framer.append(stream[offset..<end])
        // The documented bound: a client cannot make the reader hold more than this.
        require(framer.bufferedByteCount <= maxLineBytes + 1, "the framer holds \(framer.bufferedByteCount) bytes")
        offset = end
    }
    if let last = framer.finish() { events.append(last) }
    require(framer.bufferedByteCount == 0, "finish() left bytes behind")
    let expected = expectedEvents(stream, maxLineBytes: maxLineBytes)
    require(events == expected, "framing (limit \(maxLineBytes)) gave \(events), a plain split \(expected)")
    return events
}

/// The reference: lines end at "\n" (an unterminated last one still counts), lose one
/// trailing "\r", and are too long past the limit.
private func expectedEvents(_ stream: [UInt8], maxLineBytes: Int) -> [LineFramer.Event] {
    var pieces = stream.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
    if pieces.last?.isEmpty == true { pieces.removeLast() }
    return pieces.map { piece in
        var line = Array(piece)
        if line.last == UInt8(ascii: "\r") { line.removeLast() }
        return line.count > maxLineBytes ? .tooLong : .line(line)
    }
}

private func checkLine(_ line: [UInt8], checked: inout Set<RPCResponse>) {
    let json = try? JSONValue.parse(line)
    switch RPCInbound.parse(line: line) {
    case .rejected(let response):
        require(json == nil || json == .array([]), "a JSON line other than [] was rejected")
        require(response.id == .null, "a rejected line is answered with an id")
        if checked.insert(response).inserted { checkReply(response) }
    case .single(let message):
        require(json != nil && json?.arrayValue == nil, "a single message from a line that is no JSON non-array")
        checkMessage(message, checked: &checked)
    case .batch(let messages):
        require(json?.arrayValue?.count == messages.count, "a batch's count differs from the array's")
        for message in messages { checkMessage(message, checked: &checked) }
        let replies = messages.compactMap { message -> RPCResponse? in
            if case .invalid(let response) = message { return response }
            return nil
        }
        if let batchLine = RPCOutbound.batchLine(for: replies) {
            let elements = try? JSONValue.parse(batchLine.dropLast()).arrayValue
            require(elements?.compactMap(RPCResponse.init(json:)) == replies, "a batch reply does not read back")
        }
    }
}

private func checkMessage(_ message: ParsedMessage, checked: inout Set<RPCResponse>) {
    switch message {
    case .request(let request):
        let line = RPCOutbound.line(for: request)
        requireOneLine(line)
        let reread = RPCInbound.parse(line: line.dropLast())
        require(reread == .single(.request(request)), "request \(request) reads back as \(reread)")
    case .invalid(let response):
        guard case .failure(let error) = response.outcome else {
            return require(false, "an invalid request is answered with a result")
        }
        require(error.code == -32600, "an invalid request is answered with code \(error.code)")
        if checked.insert(response).inserted { checkReply(response) }
    }
}

/// A reply goes out as one line and a client reads the same reply back from it.
private func checkReply(_ response: RPCResponse) {
    let line = RPCOutbound.line(for: response)
    requireOneLine(line)
    let reread = (try? JSONValue.parse(line.dropLast())).flatMap(RPCResponse.init(json:))
    require(reread == response, "reply \(response) reads back as \(String(describing: reread))")
}

private func requireOneLine(_ line: [UInt8]) {
    require(line.last == UInt8(ascii: "\n"), "a line without its terminator")
    require(!line.dropLast().contains(UInt8(ascii: "\n")) && !line.contains(UInt8(ascii: "\r")),
            "a line break inside an outgoing line")
}
