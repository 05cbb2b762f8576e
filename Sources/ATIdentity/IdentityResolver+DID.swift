import ATSyntax
import BlueskyHTTP
import Foundation

extension IdentityResolver {
    /// Fetches and checks the DID document of `did` (did:plc from the PLC directory, did:web
    /// from the host's `/.well-known/did.json`). The document's `id` must be `did`.
    public func resolveDID(_ did: DID) async throws(IdentityError) -> DIDDocument {
        if let cached = cache.document(for: did) { return cached }
        let url = try documentURL(for: did)
        let response = try await get(url)
        switch response.status {
        case 200:
            break
        case 404, 410:
            throw .didDocumentNotFound(did, url: url.absoluteString, status: response.status)
        case 500...:
            throw .network(url: url.absoluteString, reason: "HTTP \(response.status)")
        default:
            throw .invalidDIDDocument(did, url: url.absoluteString, reason: "HTTP \(response.status)")
        }
        let document: DIDDocument
        do {
            document = try JSONDecoder().decode(DIDDocument.self, from: Data(response.body))
        } catch {
            throw .invalidDIDDocument(did, url: url.absoluteString, reason: "not a DID document (\(Self.decodingSummary(error)))")
        }
        guard document.id == did else {
            throw .invalidDIDDocument(did, url: url.absoluteString, reason: "its id is \(document.id)")
        }
        cache.store(document, for: did)
        return document
    }

    /// Where the document of `did` lives.
    func documentURL(for did: DID) throws(IdentityError) -> URL {
        switch did.method {
        case .plc:
            var base = plcURL.absoluteString
            while base.hasSuffix("/") { base.removeLast() }
            guard let url = URL(string: "\(base)/\(did)") else { throw .unsupportedDIDMethod(did) }
            return url
        case .web:
            // atproto allows only a hostname (with an optional %3A-encoded port), no path.
            guard !did.identifier.contains(":"),
                  let hostAndPort = did.identifier.removingPercentEncoding,
                  !hostAndPort.contains("/"), !hostAndPort.contains("@"),
                  let url = URL(string: "https://\(hostAndPort)/.well-known/did.json"),
                  url.host?.isEmpty == false else {
                throw .invalidDIDDocument(did, url: did.description, reason: "did:web must name a host only (no path)")
            }
            return url
        case .other:
            throw .unsupportedDIDMethod(did)
        }
    }

    private static func decodingSummary(_ error: any Error) -> String {
        guard let error = error as? DecodingError else { return "\(error)" }
        switch error {
        case .keyNotFound(let key, _): return "missing \(key.stringValue)"
        case .typeMismatch(_, let context), .valueNotFound(_, let context), .dataCorrupted(let context):
            let path = context.codingPath.map(\.stringValue).joined(separator: ".")
            return path.isEmpty ? context.debugDescription : "\(path): \(context.debugDescription)"
        @unknown default: return "\(error)"
        }
    }
}
