extension RPCError {
    /// The reply to `[]` (JSON-RPC 2.0 requires an InvalidRequest error).
    public static let emptyBatch = RPCError.invalidRequest("an empty batch holds no requests", name: "EmptyBatch")

    /// The reply to a line longer than the server's limit; the rest of that line is skipped.
    public static func lineTooLong(maxLineBytes: Int) -> RPCError {
        RPCError.invalidRequest(
            "the line is longer than \(maxLineBytes) bytes (blueskyd's max_line_bytes)", name: "LineTooLong")
    }

    /// The reply to requests that arrive while the daemon is stopping.
    public static let shuttingDown = RPCError(code: -32009, name: "ShuttingDown", message: "blueskyd is shutting down")
}
