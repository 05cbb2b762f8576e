import ATSyntax
import Foundation

/// An account's identity after resolution: the DID (the identity), its PDS, and its handle
/// with whether the handle passed the bidirectional check.
public struct ResolvedIdentity: Sendable, Codable, Equatable {
    public var did: DID
    /// The handle the document claims (or the one the user typed); show it as invalid unless verified.
    public var handle: Handle?
    /// True when handle → DID and DID document → handle agree.
    public var handleVerified: Bool
    public var pds: URL
    public var document: DIDDocument

    public init(did: DID, handle: Handle?, handleVerified: Bool, pds: URL, document: DIDDocument) {
        self.did = did
        self.handle = handle
        self.handleVerified = handleVerified
        self.pds = pds
        self.document = document
    }
}
