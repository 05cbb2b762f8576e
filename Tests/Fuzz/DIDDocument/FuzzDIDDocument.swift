import ATSyntax
import Foundation

/// libFuzzer entry point: one input is the body of a DID document response (PLC directory or
/// a did:web host), decoded as `IdentityResolver.resolveDID` does.
///
/// For every document that decodes: its `id` is a valid DID that reads back the same; the
/// handle it claims is a valid, lowercase handle taken from an `at://` alias; the PDS it names
/// is an http(s) URL with a host that survives being stored as text and parsed again (the
/// account registry keeps it as a string); and the document encodes and decodes to itself.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzDIDDocument(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let body = Data(fuzzInput(start, count))
    guard let document = try? JSONDecoder().decode(DIDDocument.self, from: body) else { return 0 }
    checkDID(document.id)
    checkHandle(document)
    checkPDS(document)
    checkCodableRoundTrip(document)
    return 0
}

private func checkDID(_ did: DID) {
    require(DID(did.string) == did, "the DID \(did) does not read back the same")
    require(did.string == "did:\(did.method):\(did.identifier)", "the DID's parts do not make up \(did)")
    require(did.string.utf8.count <= DID.maxLength, "an over-long DID was accepted")
}

private func checkHandle(_ document: DIDDocument) {
    let claimed = document.claimedHandles
    require(document.handle == claimed.first, "handle is not the first claimed handle")
    for handle in claimed {
        require(Handle(handle.string) == handle, "the handle \(handle) does not read back the same")
        require(handle.string == handle.string.lowercased(), "the handle \(handle) is not lowercase")
        require(document.alsoKnownAs.contains { $0.lowercased() == "at://\(handle.string)" },
                "the handle \(handle) is not among the at:// aliases")
    }
    let aliases = document.alsoKnownAs.filter { $0.hasPrefix("at://") }
    require(claimed.count <= aliases.count, "more handles than at:// aliases")
}

/// What `IdentityResolver.resolve` hands on as the account's PDS.
private func checkPDS(_ document: DIDDocument) {
    guard let pds = document.pdsEndpoint else {
        return
    }
    let scheme = pds.scheme?.lowercased()
    require(scheme == "https" || scheme == "http", "the PDS \(pds) is not http(s)")
    require(pds.host?.isEmpty == false, "the PDS \(pds) has no host")
    // The first #atproto_pds service of the PDS type is the one that counts, even if it is unusable.
    let service = document.services.first { service in
        (service.id == "#atproto_pds" || service.id == "\(document.id)#atproto_pds") && service.type == "AtprotoPersonalDataServer"
    }
    require(service?.serviceEndpoint.flatMap(URL.init(string:)) == pds, "the PDS is not the first #atproto_pds service's endpoint")
    // The registry stores `absoluteString` and parses it again on every call.
    let stored = URL(string: pds.absoluteString)
    require(stored?.absoluteString == pds.absoluteString && stored?.host == pds.host,
            "the PDS \(pds) does not survive being stored as text")
}

private func checkCodableRoundTrip(_ document: DIDDocument) {
    do {
        let encoded = try JSONEncoder().encode(document)
        let decoded = try JSONDecoder().decode(DIDDocument.self, from: encoded)
        require(decoded == document, "the document decodes as \(decoded) after encoding, not \(document)")
    } catch {
        require(false, "a decoded document does not encode and decode: \(error)")
    }
}
