/// Splits a byte stream into lines: `\n` terminated, one trailing `\r` stripped.
///
/// A line longer than `maxLineBytes` is reported once as `.tooLong`, and the rest of it is
/// skipped without being buffered, so a client cannot make the reader hold more than
/// `maxLineBytes` (+1 for a `\r`) of any line. Every input byte is examined once: bytes of an
/// incomplete line are kept, never rescanned.
public struct LineFramer: Sendable {
    /// What the framer found in the bytes it was given.
    public enum Event: Sendable, Hashable {
        /// A complete line without its terminator.
        case line([UInt8])
        /// A line longer than the limit; its bytes were dropped.
        case tooLong
    }

    /// The longest line accepted, in bytes, not counting `\n` or a trailing `\r`.
    public let maxLineBytes: Int
    private var partialLine: [UInt8] = []
    /// True while skipping the rest of a line already reported as `.tooLong`.
    private var skippingToNewline = false

    public init(maxLineBytes: Int = 1 << 20) {
        precondition(maxLineBytes > 0, "maxLineBytes must be positive")
        self.maxLineBytes = maxLineBytes
    }

    /// The number of bytes held for the line in progress.
    public var bufferedByteCount: Int { partialLine.count }

    /// Takes the next bytes of the stream and returns the events they complete, in order.
    public mutating func append(_ bytes: some Collection<UInt8>) -> [Event] {
        if let events = bytes.withContiguousStorageIfAvailable({ append(contiguous: UnsafeBufferPointer(rebasing: $0[...])) }) {
            return events
        }
        return Array(bytes).withUnsafeBufferPointer { append(contiguous: $0) }
    }

    /// Call at end of stream: an unterminated last line is still a line (clients such as
    /// `printf '…' | nc` often omit the final newline).
    public mutating func finish() -> Event? {
        defer {
            partialLine.removeAll()
            skippingToNewline = false
        }
        guard !skippingToNewline, !partialLine.isEmpty else { return nil }
        return complete(partialLine[...])
    }

    private mutating func append(contiguous chunk: UnsafeBufferPointer<UInt8>) -> [Event] {
        var events: [Event] = []
        var start = chunk.startIndex
        while start < chunk.endIndex {
            let rest = chunk[start...]
            let newline = rest.firstIndex(of: UInt8(ascii: "\n"))
            if skippingToNewline {
                guard let newline else { return events }
                skippingToNewline = false
                start = newline + 1
                continue
            }
            guard let newline else {
                // One byte of slack: a line of exactly maxLineBytes may still be followed by "\r".
                if partialLine.count + rest.count > maxLineBytes + 1 {
                    events.append(.tooLong)
                    partialLine.removeAll()
                    skippingToNewline = true
                } else {
                    partialLine.append(contentsOf: rest)
                }
                return events
            }
            let tail = UnsafeBufferPointer(rebasing: chunk[start..<newline])
            if partialLine.isEmpty {
                events.append(complete(tail[...]))
            } else {
                partialLine.append(contentsOf: tail)
                events.append(complete(partialLine[...]))
                partialLine.removeAll(keepingCapacity: partialLine.capacity <= 64 * 1024)
            }
            start = newline + 1
        }
        return events
    }

    private func complete(_ line: some Collection<UInt8>) -> Event {
        var content = Array(line)
        if content.last == UInt8(ascii: "\r") { content.removeLast() }
        return content.count > maxLineBytes ? .tooLong : .line(content)
    }
}
