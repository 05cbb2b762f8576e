#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A blocking JSON-RPC connection to blueskyd's Unix socket, for bskyctl and scripts.
///
/// Calls block the calling thread: do not use it on Swift concurrency's cooperative threads
/// (run it on a `Thread` of its own) or it can starve the tasks that would answer it.
/// Not thread-safe: use one connection per thread.
public final class RPCClientConnection {
    /// The socket path this connection was made to.
    public let socketPath: String
    private let fd: Int32
    private var readBuffer: [UInt8] = []
    /// Where recv(2) writes, reused for every read.
    private var receiveBuffer = [UInt8](repeating: 0, count: 64 * 1024)
    /// Bytes at the front of `readBuffer` that were already returned as lines.
    private var consumed = 0
    /// Bytes of `readBuffer` already searched for a newline.
    private var scanned = 0
    private var nextID = 1
    private var isClosed = false

    /// Connects to the daemon's socket.
    /// - Parameter timeout: how long a read or write may block before `RPCClientError.timedOut`;
    ///   nil waits forever.
    /// - Throws: `RPCClientError`.
    public init(socketPath: String, timeout: Duration? = nil) throws {
        self.socketPath = socketPath
        fd = try UnixSocketClient.connect(path: socketPath)
        if let timeout {
            do {
                try UnixSocketClient.setTimeout(fd: fd, timeout)
            } catch {
                UnixSocketClient.closeDescriptor(fd)
                throw error
            }
        }
    }

    deinit { close() }

    /// Closes the connection (also done on deinit).
    public func close() {
        guard !isClosed else { return }
        isClosed = true
        UnixSocketClient.closeDescriptor(fd)
    }

    /// Shuts down our write side: the daemon still sends every outstanding reply, then closes.
    public func closeWriteSide() throws {
        guard shutdown(fd, Int32(SHUT_WR)) == 0 else {
            throw RPCClientError.socketFailure(operation: "shutdown", errno: errno)
        }
    }

    /// Calls `method` and waits for its reply.
    /// - Returns: the result, or the daemon's error reply.
    /// - Throws: `RPCClientError` when the call itself failed; a `PermissionDenied` reply is
    ///   thrown as `.permissionDenied`.
    public func call(method: String, params: JSONValue? = nil) throws -> Result<JSONValue, RPCError> {
        let id = nextID
        nextID += 1
        do {
            try send(line: RPCOutbound.line(for: RPCRequest(id: .number(Double(id)), method: method, params: params)))
        } catch RPCClientError.connectionClosed {
            // A daemon refusing our uid answers at once and hangs up, possibly before our
            // request got through: its refusal may still be waiting to be read.
            if let line = try? readLineBytes(), let value = try? JSONValue.parse(line),
               let response = RPCResponse(json: value), case .failure(let error) = response.outcome,
               error.catalogueName == .permissionDenied {
                throw RPCClientError.permissionDenied(socketPath)
            }
            throw RPCClientError.connectionClosed
        }
        guard let line = try readLineBytes() else { throw RPCClientError.connectionClosed }
        guard let value = try? JSONValue.parse(line), let response = RPCResponse(json: value) else {
            throw RPCClientError.malformedReply("not a JSON-RPC reply object")
        }
        if case .failure(let error) = response.outcome, error.catalogueName == .permissionDenied {
            throw RPCClientError.permissionDenied(socketPath)
        }
        // A null id is how the server answers a line it could not attribute to a request.
        guard response.id == .number(Double(id)) || response.id == .null else {
            throw RPCClientError.malformedReply("the reply is for another request")
        }
        return response.outcome
    }

    /// The socket, for a client that waits on many connections at once with poll(2).
    public var fileDescriptor: Int32 { fd }

    /// From now on reads wait as long as it takes (an event stream may be quiet for hours).
    public func waitForeverOnReads() throws {
        var forever = timeval(tv_sec: 0, tv_usec: 0)
        guard setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &forever, socklen_t(MemoryLayout<timeval>.size)) == 0 else {
            throw RPCClientError.socketFailure(operation: "setsockopt", errno: errno)
        }
    }

    /// Sends one raw line (a newline is added when missing), for `bskyctl call`.
    public func send(rawLine: String) throws {
        var bytes = Array(rawLine.utf8)
        if bytes.last != UInt8(ascii: "\n") { bytes.append(UInt8(ascii: "\n")) }
        try send(line: bytes)
    }

    /// Reads the next line the daemon sent, without its terminator; nil at end of stream.
    public func readLine() throws -> String? {
        try readLineBytes().map { String(decoding: $0, as: UTF8.self) }
    }

    /// Reads the next line as bytes, without its terminator; nil at end of stream.
    public func readLineBytes() throws -> [UInt8]? {
        while true {
            if let newline = readBuffer[scanned...].firstIndex(of: UInt8(ascii: "\n")) {
                var line = Array(readBuffer[consumed..<newline])
                if line.last == UInt8(ascii: "\r") { line.removeLast() }
                consumed = newline + 1
                scanned = consumed
                compactReadBuffer()
                return line
            }
            scanned = readBuffer.count
            if try fillReadBuffer() == 0 {
                // End of stream: an unterminated last line still counts.
                guard consumed < readBuffer.count else { return nil }
                let line = Array(readBuffer[consumed...])
                consumed = readBuffer.count
                scanned = consumed
                return line
            }
        }
    }

    private func compactReadBuffer() {
        if consumed == readBuffer.count {
            readBuffer.removeAll(keepingCapacity: true)
            (consumed, scanned) = (0, 0)
        } else if consumed > 64 * 1024, consumed * 2 > readBuffer.count {
            // Drop returned lines only once they dominate the buffer, so compaction stays linear.
            readBuffer.removeFirst(consumed)
            scanned -= consumed
            consumed = 0
        }
    }

    private func fillReadBuffer() throws -> Int {
        let received = receiveBuffer.withUnsafeMutableBytes { raw in
            UnixSocketClient.retryingOnInterrupt { recv(fd, raw.baseAddress!, raw.count, 0) }
        }
        guard received >= 0 else { throw UnixSocketClient.ioError("recv", errno) }
        receiveBuffer.withUnsafeBufferPointer { readBuffer.append(contentsOf: $0[..<received]) }
        return received
    }

    private func send(line: [UInt8]) throws {
        var offset = 0
        while offset < line.count {
            let sent = line.withUnsafeBytes { raw in
                UnixSocketClient.retryingOnInterrupt {
                    UnixSocketClient.sendWithoutSignal(fd, raw.baseAddress! + offset, raw.count - offset)
                }
            }
            guard sent >= 0 else { throw UnixSocketClient.ioError("send", errno) }
            offset += sent
        }
    }
}
