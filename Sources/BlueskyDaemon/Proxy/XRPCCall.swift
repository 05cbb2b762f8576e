import ATSyntax
import Foundation
import JSONRPC
import XRPC

/// The validated params of `xrpc.call`.
struct XRPCCall: Sendable {
    var nsid: String
    var account: String?
    var kind: XRPCMethodKind
    var parameters: [(String, XRPCParameter)]
    var body: XRPCBody?
    var atprotoProxy: String?
    /// `atproto-accept-labelers`, as a gateway client sent it.
    var acceptLabelers: String?
    /// Whether the answer's email fields are withheld: a restricted client without
    /// `account:email` learns nothing of the address from `getSession` (set by its policy).
    var hidesEmail = false

    init(nsid: String, account: String?, kind: XRPCMethodKind, parameters: [(String, XRPCParameter)],
         body: XRPCBody?, atprotoProxy: String?, acceptLabelers: String?) {
        self.nsid = nsid
        self.account = account
        self.kind = kind
        self.parameters = parameters
        self.body = body
        self.atprotoProxy = atprotoProxy
        self.acceptLabelers = acceptLabelers
    }

    init(params: Params) throws(DaemonError) {
        let written = try params.requiredString("nsid")
        guard NSID(written) != nil else { throw .invalidParams("'\(written)' is not a valid NSID", field: "nsid") }
        account = try params.optionalString("account")
        var forced: XRPCMethodKind?
        if let text = try params.optionalString("kind") {
            guard let kind = XRPCMethodKind(rawValue: text), kind != .subscription else {
                throw .invalidParams("kind must be \"query\" or \"procedure\"", field: "kind")
            }
            forced = kind
        }
        switch Self.canonical(written, kind: forced) {
        case .success(let canonical): nsid = canonical
        case .failure(let refusal): throw refusal.daemonError
        }
        if let kind = forced ?? LexiconMethods.kind(of: nsid) {
            self.kind = kind
        } else {
            throw .invalidParams("\(nsid) is not in the Lexicons; say \"kind\": \"query\" or \"procedure\"", field: "kind")
        }
        parameters = try Self.queryParameters(params.optionalObject("params"))
        if let problem = Self.ambiguity(nsid: nsid, parameters: parameters) { throw problem.daemonError }
        atprotoProxy = try params.optionalString("proxy")
        if let proxy = atprotoProxy, !Self.isServiceReference(proxy) {
            throw .invalidParams("proxy must look like did:web:api.bsky.chat#bsky_chat", field: "proxy")
        }
        body = try Self.body(params)
        if body != nil, kind == .query {
            throw .invalidParams("\(nsid) is a query and takes no input", field: "input")
        }
    }

    static func queryParameters(_ object: [String: JSONValue]?) throws(DaemonError) -> [(String, XRPCParameter)] {
        guard let object else { return [] }
        var result: [(String, XRPCParameter)] = []
        for (name, value) in object.sorted(by: { $0.key < $1.key }) {
            if let list = value.arrayValue {
                var strings: [String] = []
                for element in list {
                    guard let s = scalar(element) else {
                        throw .invalidParams("params.\(name) must hold strings, numbers or booleans", field: "params.\(name)")
                    }
                    strings.append(s)
                }
                result.append((name, .list(strings)))
            } else if let s = scalar(value) {
                result.append((name, .single(s)))
            } else if value != .null {
                throw .invalidParams("params.\(name) must be a string, number, boolean or array", field: "params.\(name)")
            }
        }
        return result
    }

    private static func scalar(_ value: JSONValue) -> String? {
        switch value {
        case .string(let s): s
        case .bool(let b): b ? "true" : "false"
        case .number: value.intValue.map(String.init) ?? value.doubleValue.map { String($0) }
        case .verbatim(let text): text.integerLiteral
        default: nil
        }
    }

    static func body(_ params: Params) throws(DaemonError) -> XRPCBody? {
        let input = params.value("input")
        let base64 = try params.optionalString("inputBase64")
        switch (input, base64) {
        case (.some, .some):
            throw .invalidParams("give either input or inputBase64, not both", field: "input")
        case (let json?, nil):
            return .json(json.encoded())
        case (nil, let encoded?):
            guard let bytes = Data(base64Encoded: encoded) else {
                throw .invalidParams("inputBase64 is not valid base64", field: "inputBase64")
            }
            let type = try params.optionalString("contentType") ?? "application/octet-stream"
            guard !type.isEmpty, Self.isHeaderSafe(type) else {
                throw .invalidParams("contentType must be a media type such as image/jpeg", field: "contentType")
            }
            return .bytes(Array(bytes), contentType: type)
        case (nil, nil):
            return nil
        }
    }

    /// What `atproto-proxy` names: a DID and a service id, `did:web:api.bsky.chat#bsky_chat`.
    static func isServiceReference(_ value: String) -> Bool {
        value.hasPrefix("did:") && value.utf8.contains(UInt8(ascii: "#")) && isHeaderSafe(value)
    }

    /// Visible ASCII and spaces only: what goes into an HTTP header can never split it.
    static func isHeaderSafe(_ value: String) -> Bool {
        value.utf8.allSatisfy { $0 >= 0x20 && $0 < 0x7F }
    }
}
