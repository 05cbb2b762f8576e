import ATPermissions
import JSONRPC
import XRPC

extension CallShape {
    /// The permission-relevant shape of `call`: its proxy audience, the records its input
    /// writes, its upload's media type, the service token it asks for.
    init(_ call: XRPCCall, uploadType: String?) {
        var contentType = uploadType
        var input: JSONValue?
        switch call.body {
        case .json(let bytes): input = try? JSONValue.parse(bytes)
        case .bytes(_, let type): contentType = contentType ?? type
        case nil: break
        }
        func parameter(_ name: String) -> String? {
            guard let (_, value) = call.parameters.first(where: { $0.0 == name }), case .single(let text) = value else { return nil }
            return text
        }
        self.init(method: call.nsid, isQuery: call.kind == .query, audience: call.atprotoProxy,
                  writes: Self.writes(of: call.nsid, input: input), contentType: contentType,
                  serviceTokenMethod: parameter("lxm"), serviceTokenAudience: parameter("aud"))
    }

    /// The collection and action of each record `method` writes with `input`; a write whose
    /// collection is not a string is listed without one (it then needs `repo:*`).
    static func writes(of method: String, input: JSONValue?) -> [(collection: String?, action: Permission.RepoAction)] {
        let collection = input?["collection"]?.stringValue
        switch method {
        case "com.atproto.repo.createRecord": return [(collection, .create)]
        // An upsert: it creates or replaces, and which one is not known before the PDS looks.
        case "com.atproto.repo.putRecord": return [(collection, .create), (collection, .update)]
        case "com.atproto.repo.deleteRecord": return [(collection, .delete)]
        case "com.atproto.repo.applyWrites":
            guard case .array(let operations)? = input?["writes"] else { return [] }
            return operations.map { operation in
                let type = operation["$type"]?.stringValue ?? ""
                let action: Permission.RepoAction = type.hasSuffix("#delete") ? .delete : type.hasSuffix("#update") ? .update : .create
                // An operation of no known type needs every action.
                guard type.hasSuffix("#create") || type.hasSuffix("#update") || type.hasSuffix("#delete") else { return (nil, .create) }
                return (operation["collection"]?.stringValue, action)
            }
        default: return []
        }
    }
}
