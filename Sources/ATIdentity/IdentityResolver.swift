import ATSyntax
import BlueskyHTTP
import Foundation
import Logging

/// Resolves handles and DIDs to verified identities (handle ↔ DID ↔ DID document ↔ PDS).
///
/// All HTTP goes through the injected ``HTTPFetching`` (so its ``HTTPPolicy``, trust anchors and
/// no-redirect rule apply); DNS goes through ``DNSTXTResolver``. Answers are cached briefly.
public struct IdentityResolver: Sendable {
    public let http: any HTTPFetching
    public let dns: DNSTXTResolver
    public let plcURL: URL
    /// Timeout of each HTTP request.
    public var requestTimeout: Duration
    let logger: Logger
    let cache: IdentityCache

    public init(
        http: any HTTPFetching,
        dns: DNSTXTResolver,
        plcURL: URL = URL(string: "https://plc.directory")!,
        cacheLifetime: Duration = .seconds(300),
        requestTimeout: Duration = .seconds(10),
        logger: Logger = Logger(label: "blueskyd.identity")
    ) {
        self.http = http
        self.dns = dns
        self.plcURL = plcURL
        self.requestTimeout = requestTimeout
        self.logger = logger
        self.cache = IdentityCache(lifetime: cacheLifetime)
    }

    /// Resolves a handle or DID and checks the handle in both directions.
    ///
    /// From a handle, the DID document must claim that handle, or this throws
    /// ``IdentityError/handleMismatch(handle:did:documentHandle:)``. From a DID, the document's
    /// handle is resolved back; if it does not lead to the same DID the identity is still
    /// returned, with `handleVerified == false`.
    public func resolve(_ identifier: ATIdentifier) async throws(IdentityError) -> ResolvedIdentity {
        switch identifier {
        case .handle(let handle):
            let did = try await resolveHandle(handle)
            let document = try await resolveDID(did)
            guard document.claimedHandles.contains(handle) else {
                throw .handleMismatch(handle: handle, did: did, documentHandle: document.handle)
            }
            guard let pds = document.pdsEndpoint else { throw .noPDS(did) }
            return ResolvedIdentity(did: did, handle: handle, handleVerified: true, pds: pds, document: document)

        case .did(let did):
            let document = try await resolveDID(did)
            guard let pds = document.pdsEndpoint else { throw .noPDS(did) }
            guard let claimed = document.handle else {
                return ResolvedIdentity(did: did, handle: nil, handleVerified: false, pds: pds, document: document)
            }
            var verified = false
            do {
                verified = try await resolveHandle(claimed) == did
                if !verified { logger.info("handle does not point back to its DID", metadata: ["did": "\(did)", "handle": "\(claimed)"]) }
            } catch {
                logger.info("cannot verify handle", metadata: ["did": "\(did)", "handle": "\(claimed)", "error": "\(error)"])
            }
            return ResolvedIdentity(did: did, handle: claimed, handleVerified: verified, pds: pds, document: document)
        }
    }

    /// Drops cached answers for `identifier`, e.g. after a PDS said a token is invalid.
    public func invalidate(_ identifier: ATIdentifier) {
        switch identifier {
        case .handle(let handle): cache.forget(handle)
        case .did(let did): cache.forget(did)
        }
    }

    /// GETs `url`, mapping network failures to ``IdentityError/network(url:reason:)``.
    func get(_ url: URL) async throws(IdentityError) -> InboundResponse {
        do {
            return try await http.send(OutboundRequest(url: url), timeout: requestTimeout)
        } catch {
            throw .network(url: url.absoluteString, reason: error.description)
        }
    }
}
