import Synchronization

/// Client metadata documents the testbed hosts itself at `https://clients.<domain>/<path>`, so
/// hosted (https) client_ids can be used without an outside server. The authorization servers
/// read them from here rather than over the network.
final class OAuthClientDirectory: Sendable {
    private let documents = Mutex<[String: [UInt8]]>([:])

    /// Stores (or replaces, or with nil removes) the document served at `path` (starting with `/`).
    func publish(path: String, document: [UInt8]?) {
        documents.withLock { $0[path] = document }
    }

    func document(path: String) -> [UInt8]? {
        documents.withLock { $0[path] }
    }

    /// `GET https://clients.<domain>/<path>`: the document as JSON, or 404.
    func handle(_ request: TestbedRequest) -> TestbedResponse {
        guard request.method == .GET || request.method == .HEAD, let document = document(path: request.path) else {
            return .text("not found", status: .notFound)
        }
        return TestbedResponse(status: .ok, headers: ["Content-Type": "application/json"], body: document)
    }
}
