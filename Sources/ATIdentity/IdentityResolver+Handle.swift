import ATSyntax
import BlueskyHTTP
import Foundation

extension IdentityResolver {
    /// Resolves `handle` to a DID with DNS TXT `_atproto.<handle>` and HTTPS
    /// `/.well-known/atproto-did`, asked at the same time. DNS wins when both answer.
    public func resolveHandle(_ handle: Handle) async throws(IdentityError) -> DID {
        if let cached = cache.did(for: handle) { return cached }

        async let fromHTTPS = lookUpWellKnown(handle)
        let fromDNS = await lookUpDNS(handle)
        let did: DID
        switch fromDNS {
        case .found(let dnsDID):
            did = dnsDID  // the HTTPS lookup is cancelled when this scope ends
        case .ambiguous(let dids):
            throw .severalDIDs(handle, dids)
        case .absent(let dnsReason), .failed(let dnsReason):
            switch await fromHTTPS {
            case .found(let httpsDID):
                did = httpsDID
            case .ambiguous(let dids):
                throw .severalDIDs(handle, dids)
            case .absent(let httpsReason):
                if case .failed = fromDNS { throw .handleLookupFailed(handle, attempts: [dnsReason, httpsReason]) }
                throw .handleNotFound(handle, attempts: [dnsReason, httpsReason])
            case .failed(let httpsReason):
                throw .handleLookupFailed(handle, attempts: [dnsReason, httpsReason])
            }
        }
        cache.store(did, for: handle)
        return did
    }

    /// What one method said about a handle; reasons name the method and what it saw.
    enum HandleLookup: Sendable {
        case found(DID)
        case ambiguous([DID])
        /// The method answered: there is no (valid) DID there.
        case absent(String)
        /// The method could not be asked (network failure): the handle may still exist.
        case failed(String)
    }

    func lookUpDNS(_ handle: Handle) async -> HandleLookup {
        let name = "_atproto.\(handle)"
        let values: [String]
        do {
            values = try await dns.lookupTXT(name)
        } catch {
            return error.isTransient ? .failed("DNS: \(error)") : .absent("DNS: \(error)")
        }
        var dids: [DID] = []
        for value in values where value.hasPrefix("did=") {
            guard let did = DID(String(value.dropFirst(4))) else { continue }
            if !dids.contains(did) { dids.append(did) }
        }
        switch dids.count {
        case 0: return .absent("DNS TXT \(name): no did= record")
        case 1: return .found(dids[0])
        default: return .ambiguous(dids)
        }
    }

    func lookUpWellKnown(_ handle: Handle) async -> HandleLookup {
        guard let url = URL(string: "https://\(handle)/.well-known/atproto-did") else {
            return .absent("HTTPS: cannot build a URL for \(handle)")
        }
        let response: InboundResponse
        do {
            response = try await http.send(OutboundRequest(url: url), timeout: requestTimeout)
        } catch {
            return error.isTransient ? .failed("\(url.absoluteString): \(error)") : .absent("\(url.absoluteString): \(error)")
        }
        guard response.status == 200 else {
            return .absent("\(url.absoluteString): HTTP \(response.status)")
        }
        let text = String(decoding: response.body.prefix(2048), as: UTF8.self)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        guard let did = DID(text) else {
            return .absent("\(url.absoluteString): the body is not a DID")
        }
        return .found(did)
    }
}
