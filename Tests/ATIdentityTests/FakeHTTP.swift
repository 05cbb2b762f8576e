import BlueskyHTTP
import Foundation

/// An in-memory `HTTPFetching`: canned answers per URL (404 for the rest), and a log of requests.
final class FakeHTTP: HTTPFetching, @unchecked Sendable {
    private let lock = NSLock()
    private var routes: [String: Result<InboundResponse, HTTPError>] = [:]
    private var log: [String] = []

    var requestedURLs: [String] { lock.withLock { log } }

    func serve(_ url: String, status: Int = 200, text: String, contentType: String = "text/plain") {
        let response = InboundResponse(status: status, headers: [("Content-Type", contentType)], body: Array(text.utf8))
        lock.withLock { routes[url] = .success(response) }
    }

    func serveJSON(_ url: String, _ json: String) {
        serve(url, text: json, contentType: "application/json")
    }

    func fail(_ url: String, with error: HTTPError) {
        lock.withLock { routes[url] = .failure(error) }
    }

    func send(_ request: OutboundRequest, timeout: Duration) async throws(HTTPError) -> InboundResponse {
        let url = request.url.absoluteString
        let route = lock.withLock {
            log.append(url)
            return routes[url]
        }
        switch route {
        case .success(let response): return response
        case .failure(let error): throw error
        case nil: return InboundResponse(status: 404, headers: [], body: Array("not found".utf8))
        }
    }
}

/// A minimal atproto DID document as a PLC directory or did:web host would serve it.
func didDocumentJSON(did: String, handle: String?, pds: String = "https://pds.example.com") -> String {
    let aliases = handle.map { "[\"at://\($0)\"]" } ?? "[]"
    return """
    {"@context":["https://www.w3.org/ns/did/v1"],"id":"\(did)","alsoKnownAs":\(aliases),
     "verificationMethod":[],
     "service":[{"id":"#atproto_pds","type":"AtprotoPersonalDataServer","serviceEndpoint":"\(pds)"}]}
    """
}
