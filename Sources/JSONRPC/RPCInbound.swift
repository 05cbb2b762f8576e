/// One element of an incoming line: a request to run, or an error to answer right away.
public enum ParsedMessage: Sendable, Hashable {
    /// A valid request, or a notification when `id` is nil.
    case request(RPCRequest)
    /// Not a valid request object: reply with this (its id when it could be recovered, else null).
    case invalid(RPCResponse)
}

/// How one incoming line is to be answered.
public enum ParsedLine: Sendable, Hashable {
    /// A single JSON object: one reply unless it is a valid notification.
    case single(ParsedMessage)
    /// A non-empty array: one reply line holding the replies of its non-notification elements,
    /// or nothing when every element is a valid notification.
    case batch([ParsedMessage])
    /// The line as a whole cannot be served (not JSON, an empty batch, too long): reply with
    /// this one response.
    case rejected(RPCResponse)
}

/// Classifies incoming lines per JSON-RPC 2.0 (https://www.jsonrpc.org/specification).
public enum RPCInbound {
    /// Parses one line (without its terminator).
    public static func parse(line: some Collection<UInt8>) -> ParsedLine {
        let value: JSONValue
        do {
            value = try JSONValue.parse(line)
        } catch {
            return .rejected(RPCResponse(id: .null, outcome: .failure(.parseError("the line is not valid JSON"))))
        }
        return classify(value)
    }

    /// Classifies an already parsed JSON value.
    public static func classify(_ value: JSONValue) -> ParsedLine {
        switch value {
        case .array(let elements):
            guard !elements.isEmpty else {
                return .rejected(RPCResponse(id: .null, outcome: .failure(.emptyBatch)))
            }
            return .batch(elements.map(message(from:)))
        default:
            return .single(message(from: value))
        }
    }

    /// The reply to a line longer than the limit.
    public static func lineTooLongResponse(maxLineBytes: Int) -> RPCResponse {
        RPCResponse(id: .null, outcome: .failure(.lineTooLong(maxLineBytes: maxLineBytes)))
    }

    /// Validates one request object (also used for each element of a batch).
    public static func message(from value: JSONValue) -> ParsedMessage {
        guard case .object(let fields) = value else {
            return invalid(id: .null, "a request must be a JSON object")
        }
        var id: RPCID?
        if let idValue = fields["id"] {
            guard let validID = RPCID(json: idValue) else {
                return invalid(id: .null, "\"id\" must be a string, a number or null")
            }
            id = validID
        }
        let replyID = id ?? .null
        guard fields["jsonrpc"] == "2.0" else {
            return invalid(id: replyID, "\"jsonrpc\" must be \"2.0\"")
        }
        guard let methodValue = fields["method"] else {
            return invalid(id: replyID, "\"method\" is missing")
        }
        guard case .string(let method) = methodValue else {
            return invalid(id: replyID, "\"method\" must be a string")
        }
        let params = fields["params"]
        switch params {
        case nil, .object?, .array?: break
        default: return invalid(id: replyID, "\"params\" must be an object or an array")
        }
        return .request(RPCRequest(id: id, method: method, params: params))
    }

    private static func invalid(id: RPCID, _ detail: String) -> ParsedMessage {
        .invalid(RPCResponse(id: id, outcome: .failure(.invalidRequest(detail))))
    }
}
