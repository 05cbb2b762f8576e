/// What one XRPC call needs a grant to hold, worked out from the call alone.
///
/// The mapping follows the reference PDS: record writes need `repo:` for their collection and
/// action, blob uploads `blob:` for their media type, account and identity changes `account:`
/// and `identity:`, a service token `rpc:` for the method and audience it is minted for, and any
/// other authenticated call `rpc:` for itself. Public reads of a repository and the session's
/// own description need nothing.
public enum PermissionNeed: Hashable, Sendable, CustomStringConvertible {
    case repo(collection: String, action: Permission.RepoAction)
    /// `isQuery`: a read (XRPC GET) that mints nothing, which blueskyd's `read` allows.
    case rpc(method: String, audience: String?, isQuery: Bool)
    case blob(mediaType: String)
    case account(attribute: String, action: Permission.AccountAction)
    case identity(attribute: String)
    /// A call to an OAuth 2.0 server's account: its method and (normalised) path.
    case http(method: String, path: String)

    /// The narrowest permission that would grant it, as a scope token (what a refusal names).
    public var description: String {
        switch self {
        case .repo(let collection, let action): "repo:\(collection)?action=\(action.rawValue)"
        case .rpc(let method, let audience, _): Permission.rpc(method: method, audience: audience ?? "*").description
        case .blob(let mediaType): "blob:\(mediaType)"
        case .account(let attribute, let action): Permission.account(attribute: attribute, action: action).description
        case .identity(let attribute): "identity:\(attribute)"
        case .http(let method, let path): "http:\(method):\(path)"
        }
    }
}

/// The shape of a call, as much of it as permissions depend on.
public struct CallShape: Sendable {
    public var method: String
    public var isQuery: Bool
    /// The service the call is proxied to (`atproto-proxy`), nil for the PDS's own choice.
    public var audience: String?
    /// Record writes the call makes (`createRecord`, `putRecord`, `deleteRecord`,
    /// `applyWrites`): collection and action, nil collection when the input does not say.
    public var writes: [(collection: String?, action: Permission.RepoAction)]
    /// The upload's media type.
    public var contentType: String?
    /// `getServiceAuth`'s `lxm` and `aud` parameters.
    public var serviceTokenMethod: String?
    public var serviceTokenAudience: String?

    public init(method: String, isQuery: Bool, audience: String? = nil,
                writes: [(collection: String?, action: Permission.RepoAction)] = [], contentType: String? = nil,
                serviceTokenMethod: String? = nil, serviceTokenAudience: String? = nil) {
        self.method = method
        self.isQuery = isQuery
        self.audience = audience
        self.writes = writes
        self.contentType = contentType
        self.serviceTokenMethod = serviceTokenMethod
        self.serviceTokenAudience = serviceTokenAudience
    }

    /// The record-writing methods, whose input names the collections written.
    public static let recordWriters: Set<String> = [
        "com.atproto.repo.createRecord", "com.atproto.repo.putRecord", "com.atproto.repo.deleteRecord",
        "com.atproto.repo.applyWrites",
    ]

    /// Calls any session may make: the session's own description and public data.
    static let free: Set<String> = [
        "com.atproto.server.getSession", "com.atproto.server.describeServer",
        "com.atproto.identity.resolveHandle", "com.atproto.identity.resolveDid", "com.atproto.identity.resolveIdentity",
        "com.atproto.repo.getRecord", "com.atproto.repo.listRecords", "com.atproto.repo.describeRepo",
        "com.atproto.repo.listMissingBlobs",
    ]

    /// Everything this call needs; empty when it needs nothing.
    public var needs: [PermissionNeed] {
        if Self.free.contains(method) { return [] }
        if method.hasPrefix("com.atproto.sync."), isQuery { return [] }  // public repository data
        if Self.recordWriters.contains(method) {
            // A write whose collection cannot be read needs the wildcard.
            return writes.isEmpty ? Permission.RepoAction.allCases.map { .repo(collection: "*", action: $0) }
                : writes.map { .repo(collection: $0.collection ?? "*", action: $0.action) }
        }
        switch method {
        case "com.atproto.repo.uploadBlob":
            return [.blob(mediaType: contentType ?? "application/octet-stream")]
        case "com.atproto.server.getServiceAuth":
            return [.rpc(method: serviceTokenMethod ?? "*", audience: serviceTokenAudience, isQuery: false)]
        case "com.atproto.repo.importRepo":
            return [.account(attribute: "repo", action: .manage)]
        case "com.atproto.server.checkAccountStatus":
            return [.account(attribute: "status", action: .read)]
        case "com.atproto.server.activateAccount", "com.atproto.server.deactivateAccount":
            return [.account(attribute: "status", action: .manage)]
        case "com.atproto.identity.updateHandle":
            return [.identity(attribute: "handle")]
        default:
            break
        }
        if method.hasPrefix("com.atproto.identity.") { return [.identity(attribute: "*")] }
        if method.hasPrefix("com.atproto.server.") {
            let email = method.lowercased().contains("email")
            return [.account(attribute: email ? "email" : "*", action: .manage)]
        }
        return [.rpc(method: method, audience: audience, isQuery: isQuery)]
    }
}
