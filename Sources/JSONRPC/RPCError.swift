/// A JSON-RPC 2.0 error object: a standard `code`, a one-line `message` for people and a
/// stable `data.name` for scripts (see docs/PROTOCOL.md for the table).
public struct RPCError: Error, Sendable, Hashable, CustomStringConvertible {
    public var code: Int
    public var message: String
    /// Always an object holding at least `"name"`.
    public var data: [String: JSONValue]

    public init(code: Int, name: String, message: String, extra: [String: JSONValue] = [:]) {
        self.code = code
        self.message = message
        var data = extra
        data["name"] = .string(name)
        self.data = data
    }

    /// The stable name scripts match on (`data.name`).
    public var name: String { data["name"]?.stringValue ?? "Unknown" }

    public var description: String { message }

    public var json: JSONValue {
        .object(["code": .number(Double(code)), "message": .string(message), "data": .object(data)])
    }

    public init?(json: JSONValue) {
        guard let code = json["code"]?.intValue, let message = json["message"]?.stringValue else { return nil }
        self.code = code
        self.message = message
        self.data = json["data"]?.objectValue ?? [:]
        if data["name"] == nil { data["name"] = .string("Unknown") }
    }
}

extension RPCError {
    public static func parseError(_ detail: String) -> RPCError {
        RPCError(code: -32700, name: "ParseError", message: "parse error: \(detail)")
    }
    public static func invalidRequest(_ detail: String, name: String = "InvalidRequest") -> RPCError {
        RPCError(code: -32600, name: name, message: "invalid request: \(detail)")
    }
    public static func methodNotFound(_ method: String) -> RPCError {
        RPCError(code: -32601, name: "MethodNotFound", message: "no such method: \(method)", extra: ["method": .string(method)])
    }
    public static func invalidParams(_ detail: String, field: String? = nil) -> RPCError {
        RPCError(code: -32602, name: "InvalidParams", message: "invalid params: \(detail)",
                 extra: field.map { ["field": .string($0)] } ?? [:])
    }
    public static func internalError(_ detail: String) -> RPCError {
        RPCError(code: -32603, name: "InternalError", message: "internal error: \(detail)")
    }
    public static let permissionDenied = RPCError(
        code: -32000, name: "PermissionDenied",
        message: "permission denied: this blueskyd serves only its own user")
}
