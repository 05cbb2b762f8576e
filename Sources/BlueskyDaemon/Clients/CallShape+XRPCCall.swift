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
            return operations.flatMap { operation -> [(collection: String?, action: Permission.RepoAction)] in
                let collection = operation["collection"]?.stringValue
                // The PDS takes these three types (a reference relative to the Lexicon, or whole); anything else (a typo, another
                // spelling, none) is judged as every action, so it can never pass for less.
                switch operation["$type"]?.stringValue {
                case "com.atproto.repo.applyWrites#create", "#create": return [(collection, .create)]
                case "com.atproto.repo.applyWrites#update", "#update": return [(collection, .update)]
                case "com.atproto.repo.applyWrites#delete", "#delete": return [(collection, .delete)]
                default: return Permission.RepoAction.allCases.map { (collection, $0) }
                }
            }
        default: return []
        }
    }
}
