import ATSyntax

/// Why an identity could not be resolved or verified: one clear line each.
public enum IdentityError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Neither DNS nor HTTPS has a DID for the handle; `attempts` says what each method found.
    case handleNotFound(Handle, attempts: [String])
    /// No method found a DID and at least one could not be asked (network failure).
    case handleLookupFailed(Handle, attempts: [String])
    /// Several different `did=` TXT records: the handle is ambiguous.
    case severalDIDs(Handle, [DID])
    case unsupportedDIDMethod(DID)
    case didDocumentNotFound(DID, url: String, status: Int)
    case invalidDIDDocument(DID, url: String, reason: String)
    case noPDS(DID)
    /// The handle points at `did`, but that DID's document does not claim the handle.
    case handleMismatch(handle: Handle, did: DID, documentHandle: Handle?)
    /// A network failure talking to `url` (DNS server, PLC directory, did:web host, ...).
    case network(url: String, reason: String)

    public var description: String {
        switch self {
        case .handleNotFound(let handle, let attempts):
            "handle \(handle) not found (\(attempts.joined(separator: "; ")))"
        case .handleLookupFailed(let handle, let attempts):
            "could not resolve handle \(handle) (\(attempts.joined(separator: "; ")))"
        case .severalDIDs(let handle, let dids):
            "handle \(handle) has several different DIDs in DNS: \(dids.map(\.description).joined(separator: ", "))"
        case .unsupportedDIDMethod(let did):
            "cannot resolve \(did): only did:plc and did:web are supported"
        case .didDocumentNotFound(let did, let url, let status):
            "DID document of \(did) not found (\(url) answered HTTP \(status))"
        case .invalidDIDDocument(let did, let url, let reason):
            "invalid DID document for \(did) from \(url): \(reason)"
        case .noPDS(let did):
            "the DID document of \(did) names no PDS (no #atproto_pds service of type AtprotoPersonalDataServer)"
        case .handleMismatch(let handle, let did, let documentHandle):
            "handle \(handle) points to \(did), but that DID's document "
                + (documentHandle.map { "claims the handle \($0) instead" } ?? "claims no handle")
        case .network(let url, let reason):
            "network failure reaching \(url): \(reason)"
        }
    }

    /// Worth retrying later: the failure may be the network's, not the identity's.
    public var isTransient: Bool {
        switch self {
        case .network, .handleLookupFailed: true
        default: false
        }
    }
}
