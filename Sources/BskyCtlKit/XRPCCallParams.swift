import FoundationEssentials
import JSONRPC

/// Whether to force GET (query) or POST (procedure) for an NSID the daemon's Lexicons lack.
public enum XRPCKind: String, Sendable, Equatable {
    case query, procedure
}

/// The pieces of an `xrpc.call` request as given on bskyctl's command line.
public struct XRPCCallRequest: Sendable, Equatable {
    public var nsid: String
    /// `--param key=value` arguments, in order.
    public var parameters: [String]
    /// The bytes of `--input`, when given.
    public var input: [UInt8]?
    public var contentType: String?
    public var account: String?
    public var kind: XRPCKind?
    public var atprotoProxy: String?

    public init(nsid: String, parameters: [String] = [], input: [UInt8]? = nil, contentType: String? = nil,
                account: String? = nil, kind: XRPCKind? = nil, atprotoProxy: String? = nil) {
        self.nsid = nsid
        self.parameters = parameters
        self.input = input
        self.contentType = contentType
        self.account = account
        self.kind = kind
        self.atprotoProxy = atprotoProxy
    }

    /// The `xrpc.call` params object, or a usage failure that says what to fix.
    public func rpcParams() throws(CtlFailure) -> JSONValue {
        var fields: [String: JSONValue] = ["nsid": .string(nsid)]
        if let account { fields["account"] = .string(account) }
        if let kind { fields["kind"] = .string(kind.rawValue) }
        if let atprotoProxy { fields["proxy"] = .string(atprotoProxy) }
        let query = try Self.queryParameters(parameters)
        if !query.isEmpty { fields["params"] = .object(query) }
        if let input {
            if let contentType, !Self.isJSON(contentType) {
                fields["inputBase64"] = .string(Data(input).base64EncodedString())
                fields["contentType"] = .string(contentType)
            } else {
                fields["input"] = try Self.parseJSONInput(input)
            }
        } else if contentType != nil {
            throw .usage("--content-type describes --input, but no --input was given")
        }
        return .object(fields)
    }

    /// `key=value` strings as query parameters: values stay strings (the daemon sends them
    /// as a query string), and a key given several times becomes an array, in order.
    public static func queryParameters(_ pairs: [String]) throws(CtlFailure) -> [String: JSONValue] {
        var values: [String: [String]] = [:]
        for pair in pairs {
            guard let equals = pair.firstIndex(of: "=") else {
                throw .usage("--param '\(pair)' is not of the form key=value")
            }
            let key = String(pair[..<equals])
            guard !key.isEmpty else { throw .usage("--param '\(pair)' has an empty key") }
            values[key, default: []].append(String(pair[pair.index(after: equals)...]))
        }
        return values.mapValues { list in
            list.count == 1 ? .string(list[0]) : .array(list.map { .string($0) })
        }
    }

    /// True for `application/json`, with or without parameters such as `; charset=utf-8`.
    public static func isJSON(_ contentType: String) -> Bool {
        let mediaType = contentType.split(separator: ";", maxSplits: 1).first ?? ""
        return mediaType.trimmingSpaces().lowercased() == "application/json"
    }

    private static func parseJSONInput(_ bytes: [UInt8]) throws(CtlFailure) -> JSONValue {
        do {
            return try JSONValue.parse(bytes)
        } catch {
            throw .usage("--input is not valid JSON; to send it as raw bytes, give its type with --content-type (for example --content-type image/jpeg)")
        }
    }
}

/// How `bskyctl proxy` presents an `xrpc.call` result.
public enum XRPCResultOutput {
    /// The line for an XRPC error status (400 or more), e.g. `error: 400 InvalidRequest: bad cursor`;
    /// nil below 400.
    public static func errorLine(for result: JSONValue) -> String? {
        guard let status = result["status"]?.intValue, status >= 400 else { return nil }
        var line = "error: \(status)"
        if let name = result["body"]?["error"]?.stringValue, !name.isEmpty { line += " \(name)" }
        if let message = result["body"]?["message"]?.stringValue, !message.isEmpty { line += ": \(message)" }
        return line.singleLine
    }

    /// The bytes `proxy` writes without `--json`: the JSON body pretty-printed with a newline,
    /// the raw bytes of `bodyBase64`, or nothing when there is no body.
    public static func bodyBytes(of result: JSONValue) throws(CtlFailure) -> [UInt8] {
        if let body = result["body"] {
            return Array((body.prettyPrinted + "\n").utf8)
        }
        if let encoded = result["bodyBase64"]?.stringValue {
            guard let data = Data(base64Encoded: encoded) else {
                throw .requestFailed("blueskyd's reply has a bodyBase64 that is not base64")
            }
            return Array(data)
        }
        return []
    }
}
