/// Encodes messages as protocol lines (compact JSON followed by `\n`).
public enum RPCOutbound {
    /// The line carrying one reply.
    public static func line(for response: RPCResponse) -> [UInt8] {
        line(for: response.json)
    }

    /// The line carrying a batch's replies, in the batch's order; nil when there is nothing
    /// to send (every element was a notification: JSON-RPC 2.0 forbids an empty array reply).
    public static func batchLine(for responses: [RPCResponse]) -> [UInt8]? {
        guard !responses.isEmpty else { return nil }
        return line(for: .array(responses.map(\.json)))
    }

    /// The line carrying one request or notification.
    public static func line(for request: RPCRequest) -> [UInt8] {
        line(for: request.json)
    }

    /// Any JSON value as one line.
    public static func line(for value: JSONValue) -> [UInt8] {
        var bytes = value.encoded()
        bytes.append(UInt8(ascii: "\n"))
        return bytes
    }
}
