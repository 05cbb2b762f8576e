import JSONRPC

/// Typed access to a request's named params, with errors that name the field.
struct Params: Sendable {
    let fields: [String: JSONValue]

    init(_ params: JSONValue?) throws(DaemonError) {
        switch params {
        case nil, .null?: fields = [:]
        case .object(let object)?: fields = object
        default: throw .invalidParams("params must be an object of named params", field: nil)
        }
    }

    func value(_ name: String) -> JSONValue? {
        guard let value = fields[name], value != .null else { return nil }
        return value
    }

    func requiredString(_ name: String) throws(DaemonError) -> String {
        guard let value = try optionalString(name) else {
            throw .invalidParams("\(name) is required", field: name)
        }
        return value
    }

    func optionalString(_ name: String) throws(DaemonError) -> String? {
        guard let value = value(name) else { return nil }
        guard let string = value.stringValue, !string.isEmpty else {
            throw .invalidParams("\(name) must be a non-empty string", field: name)
        }
        return string
    }

    func bool(_ name: String, default fallback: Bool) throws(DaemonError) -> Bool {
        guard let value = value(name) else { return fallback }
        guard let bool = value.boolValue else { throw .invalidParams("\(name) must be true or false", field: name) }
        return bool
    }

    func optionalObject(_ name: String) throws(DaemonError) -> [String: JSONValue]? {
        guard let value = value(name) else { return nil }
        guard let object = value.objectValue else { throw .invalidParams("\(name) must be an object", field: name) }
        return object
    }

    /// Refuses params the method does not know, so a typo is not silently ignored.
    func allowOnly(_ names: Set<String>) throws(DaemonError) {
        if let unknown = fields.keys.sorted().first(where: { !names.contains($0) }) {
            throw .invalidParams("unknown param '\(unknown)'", field: unknown)
        }
    }
}
