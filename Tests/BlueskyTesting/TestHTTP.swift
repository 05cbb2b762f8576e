import BlueskyHTTP

extension HTTPFetching {
    /// A test's own exchange (a browser, a fixture), with a deadline long enough that only a
    /// test of deadlines meets it: the daemon's code always names its own.
    public func send(_ request: OutboundRequest) async throws(HTTPError) -> InboundResponse {
        try await send(request, timeout: .seconds(30))
    }
}
