/// A JSON-RPC 2.0 error object: a standard `code`, a one-line `message` for people and a
/// stable `data.name` for scripts (see docs/PROTOCOL.md for the table).
///
/// blueskyd builds its errors from the catalogue, `RPCError(DaemonErrorName, values)`, so that
/// a name always comes with its code, data fields and message.
public struct RPCError: Error, Sendable, Hashable, CustomStringConvertible {
    public var code: Int
    public var message: String
    /// Always an object holding at least `"name"`.
    public var data: [String: JSONValue]

    /// An error as sent by any peer, known name or not (to build blueskyd's own, use the
    /// catalogue's initializer).
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

// The generic errors any method or the framing can answer with.
extension RPCError {
    public static func parseError(_ detail: String) -> RPCError {
        RPCError(.parseError, [.detail: .string(detail)])
    }
    public static func invalidRequest(_ detail: String) -> RPCError {
        RPCError(.invalidRequest, [.detail: .string(detail)])
    }
    public static func methodNotFound(_ method: String) -> RPCError {
        RPCError(.methodNotFound, [.method: .string(method)])
    }
    public static func invalidParams(_ detail: String, field: String? = nil) -> RPCError {
        var values: [DaemonErrorName.Field: JSONValue] = [.detail: .string(detail)]
        if let field { values[.field] = .string(field) }
        return RPCError(.invalidParams, values)
    }
    public static func internalError(_ detail: String) -> RPCError {
        RPCError(.internalError, [.detail: .string(detail)])
    }
    public static let permissionDenied = RPCError(.permissionDenied)
}
