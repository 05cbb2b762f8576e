/// A JSON-RPC 2.0 request id: a string, a number, or null.
public enum RPCID: Sendable, Hashable {
    case string(String)
    case number(Double)
    /// An integer beyond what a Double holds exactly, kept as its digits so the reply echoes it.
    case largeInteger(String)
    case null

    public var json: JSONValue {
        switch self {
        case .string(let s): .string(s)
        case .number(let n): .number(n)
        case .largeInteger(let digits): .verbatim(JSONText(checked: Array(digits.utf8)))
        case .null: .null
        }
    }

    public init?(json: JSONValue) {
        switch json {
        case .string(let s): self = .string(s)
        case .number(let n): self = .number(n)
        case .verbatim(let text):
            guard let digits = text.integerLiteral else { return nil }
            self = .largeInteger(digits)
        case .null: self = .null
        default: return nil
        }
    }
}

/// A request or notification (a notification has no `id` and gets no reply).
public struct RPCRequest: Sendable, Hashable {
    public var id: RPCID?
    public var method: String
    /// An object or array, or nil when the request had no params.
    public var params: JSONValue?

    public init(id: RPCID?, method: String, params: JSONValue? = nil) {
        self.id = id
        self.method = method
        self.params = params
    }

    public var isNotification: Bool { id == nil }

    public var json: JSONValue {
        var fields: [String: JSONValue] = ["jsonrpc": "2.0", "method": .string(method)]
        if let id { fields["id"] = id.json }
        if let params { fields["params"] = params }
        return .object(fields)
    }
}

/// A reply: either a result or an error, for the request with `id`.
public struct RPCResponse: Sendable, Hashable {
    public var id: RPCID
    public var outcome: Result<JSONValue, RPCError>

    public init(id: RPCID, outcome: Result<JSONValue, RPCError>) {
        self.id = id
        self.outcome = outcome
    }

    public var json: JSONValue {
        var fields: [String: JSONValue] = ["jsonrpc": "2.0", "id": id.json]
        switch outcome {
        case .success(let result): fields["result"] = result
        case .failure(let error): fields["error"] = error.json
        }
        return .object(fields)
    }

    /// Reads a reply object; nil when it is not one.
    public init?(json: JSONValue) {
        guard json["jsonrpc"] == "2.0", let idValue = json["id"], let id = RPCID(json: idValue) else { return nil }
        self.id = id
        if let error = json["error"], let rpcError = RPCError(json: error) {
            outcome = .failure(rpcError)
        } else if let result = json["result"] {
            outcome = .success(result)
        } else {
            return nil
        }
    }
}
