extension RPCError {
    /// The reply to `[]` (JSON-RPC 2.0 requires an InvalidRequest error).
    public static let emptyBatch = RPCError(.emptyBatch)

    /// The reply to a line longer than the server's limit; the rest of that line is skipped.
    public static func lineTooLong(maxLineBytes: Int) -> RPCError {
        RPCError(.lineTooLong, [.limit: .number(Double(maxLineBytes))])
    }

    /// The reply to requests that arrive while the daemon is stopping.
    public static let shuttingDown = RPCError(.shuttingDown)
}
