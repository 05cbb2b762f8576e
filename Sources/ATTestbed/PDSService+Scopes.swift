import Foundation
import JSONRPC

/// OAuth scopes at the PDS, as the reference PDS enforces them: a session granted
/// `transition:generic` may do what an app password may; a session with granular permissions
/// only what they name. A call beyond them is refused with 403 `ScopeMissingError`,
/// "Missing required scope "<permission>"" (the reference's `ScopeMissingError`).
///
/// Written apart from blueskyd's permission code on purpose, from the reference's rules, so
/// that the two can disagree and a test show it.
extension PDSService {
    func checkScope(_ scope: String, did: String, request: TestbedRequest) throws(XRPCError) {
        let tokens = scope.split(separator: " ").map(String.init)
        if tokens.contains("transition:generic") { return }
        let nsid = PDSService.routed(String(request.path.dropFirst("/xrpc/".count)))
        guard let needed = Self.permissionNeeded(nsid: nsid, request: request) else { return }
        guard !tokens.contains(where: { Self.token($0, grants: needed) }) else { return }
        context.oauth.metrics.record(did: did) { $0.scopeRefusals += 1 }
        throw XRPCError(.forbidden, "ScopeMissingError", "Missing required scope \"\(needed.text)\"")
    }

    enum NeededPermission {
        case repo(collection: String, action: String)
        case blob(String)
        case rpc(String)

        var text: String {
            switch self {
            case .repo(let collection, let action): "repo:\(collection)?action=\(action)"
            case .blob(let type): "blob:\(type)"
            case .rpc(let method): "rpc:\(method)?aud=*"
            }
        }
    }

    static let scopeFree: Set<String> = [
        "com.atproto.server.getSession", "com.atproto.server.describeServer", "com.atproto.repo.getRecord",
        "com.atproto.repo.listRecords", "com.atproto.repo.describeRepo", "com.atproto.identity.resolveHandle",
        "com.atproto.server.refreshSession", "com.atproto.server.deleteSession",
    ]

    static func permissionNeeded(nsid: String, request: TestbedRequest) -> NeededPermission? {
        if scopeFree.contains(nsid) || nsid.hasPrefix("com.atproto.sync.") { return nil }
        let body = try? JSONValue.parse(Array(request.body.readableBytesView))
        let collection = body?["collection"]?.stringValue ?? "*"
        switch nsid {
        case "com.atproto.repo.createRecord", "com.atproto.repo.putRecord": return .repo(collection: collection, action: "create")
        case "com.atproto.repo.deleteRecord": return .repo(collection: collection, action: "delete")
        case "com.atproto.repo.uploadBlob": return .blob(request.headers.first(name: "content-type") ?? "*/*")
        default: return .rpc(nsid)
        }
    }

    static func token(_ token: String, grants needed: NeededPermission) -> Bool {
        let parts = token.split(separator: "?", maxSplits: 1)
        let head = parts.first.map(String.init) ?? token
        let query = parts.count > 1 ? String(parts[1]) : ""
        switch needed {
        case .repo(let collection, let action):
            guard head == "repo:\(collection)" || head == "repo:*" else { return false }
            let actions = query.split(separator: "&").filter { $0.hasPrefix("action=") }.map { $0.dropFirst("action=".count) }
            return actions.isEmpty || actions.contains(Substring(action))
        case .blob(let type):
            guard head.hasPrefix("blob:") else { return false }
            let range = head.dropFirst("blob:".count)
            return range == "*/*" || range == type || (range.hasSuffix("/*") && type.hasPrefix(range.dropLast()))
        case .rpc(let method):
            return head == "rpc:\(method)" || head == "rpc:*"
        }
    }
}
