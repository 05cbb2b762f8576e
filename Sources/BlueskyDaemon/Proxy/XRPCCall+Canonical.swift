import XRPC
import XRPCGateway

/// Why a call is not made as written: the one reason, for either front.
struct CallRefusal: Error, Equatable {
    /// How the gateway answers it: 400 for a malformed call, 501 for a method blueskyd does
    /// not carry (an event stream, a name no Lexicon of its namespace has).
    enum Kind { case invalid, unsupportedMethod }
    var kind: Kind
    var message: String
    var field: String

    var daemonError: DaemonError { .invalidParams(message, field: field) }

    var gatewayResponse: GatewayResponse {
        switch kind {
        case .invalid: .xrpcError(.badRequest, "InvalidRequest", message)
        case .unsupportedMethod: .xrpcError(.notImplemented, GatewayErrorName.methodNotSupported.rawValue, message)
        }
    }
}

extension XRPCCall {
    /// The Lexicons' spelling of `written` (see `CanonicalNSID`), called as `kind` (nil: as the
    /// Lexicons say). A known method called the other way, an event stream, or a method of a
    /// known namespace that none of its methods names is refused, never sent.
    static func canonical(_ written: String, kind: XRPCMethodKind?) -> Result<String, CallRefusal> {
        switch LexiconMethods.canonical(written) {
        case .known(let nsid, let known):
            // Deliberately refused, not unfinished: an event stream is a WebSocket that lives
            // for hours, which a request-and-answer proxy does not carry; programs subscribe to
            // the relay or the PDS themselves (reading a firehose needs no credentials).
            if known == .subscription {
                return .failure(CallRefusal(kind: .unsupportedMethod, message: "\(nsid) is an event stream (subscription), which blueskyd does not proxy",
                                            field: "nsid"))
            }
            if let kind, kind != known {
                return .failure(CallRefusal(kind: .invalid, message: "\(nsid) is a \(known.rawValue): call it with \(known.httpMethod)",
                                            field: "kind"))
            }
            return .success(nsid)
        case .unknown(let nsid):
            return .success(nsid)
        case .refused(let namespace):
            return .failure(CallRefusal(
                kind: .unsupportedMethod,
                message: "'\(written.prefix(200))' is no method of \(namespace) in blueskyd's Lexicons (in any letter case), so it is not sent",
                field: "nsid"))
        }
    }

    /// Parameters that decide a permission (`getServiceAuth`'s `aud` and `lxm`) must each be
    /// given once: a list would be read one way by the policy and another by the server.
    static func ambiguity(nsid: String, parameters: [(String, XRPCParameter)]) -> CallRefusal? {
        guard nsid == "com.atproto.server.getServiceAuth" else { return nil }
        var seen: Set<String> = []
        for (name, value) in parameters where Self.decisiveParameters.contains(name) {
            if case .list = value { return CallRefusal(kind: .invalid, message: "\(name) is given more than once", field: "params.\(name)") }
            if !seen.insert(name).inserted { return CallRefusal(kind: .invalid, message: "\(name) is given more than once", field: "params.\(name)") }
        }
        return nil
    }

    static let decisiveParameters: Set<String> = ["aud", "lxm", "exp"]
}
