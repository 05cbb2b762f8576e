import JSONRPC
import Testing

/// The examples of https://www.jsonrpc.org/specification#examples, plus the id-recovery rules.
@Suite("RPCInbound")
struct RPCInboundTests {
    private func parse(_ line: String) -> ParsedLine {
        RPCInbound.parse(line: Array(line.utf8))
    }

    private func invalid(_ id: RPCID, name: String = "InvalidRequest") -> (ParsedMessage) -> Bool {
        { message in
            guard case .invalid(let response) = message, case .failure(let error) = response.outcome else { return false }
            return response.id == id && error.code == -32600 && error.name == name
        }
    }

    @Test("a request with positional params")
    func positionalRequest() {
        let parsed = parse(#"{"jsonrpc": "2.0", "method": "subtract", "params": [42, 23], "id": 1}"#)
        #expect(parsed == .single(.request(RPCRequest(id: .number(1), method: "subtract", params: [42, 23]))))
    }

    @Test("a notification has no id")
    func notification() {
        guard case .single(.request(let request)) = parse(#"{"jsonrpc": "2.0", "method": "update", "params": [1,2,3,4,5]}"#) else {
            Issue.record("not a request")
            return
        }
        #expect(request.isNotification)
    }

    @Test("an explicit null id is a request, not a notification")
    func nullID() {
        #expect(parse(#"{"jsonrpc":"2.0","method":"m","id":null}"#) == .single(.request(RPCRequest(id: .null, method: "m"))))
    }

    @Test("invalid JSON is a ParseError with id null", arguments: [
        #"{"jsonrpc": "2.0", "method": "foobar, "params": "bar", "baz]"#,
        #"[{"jsonrpc": "2.0", "method": "sum", "params": [1,2,4], "id": "1"},{"jsonrpc": "2.0", "method""#,
        "", "{} trailing",
    ])
    func parseError(line: String) {
        guard case .rejected(let response) = parse(line), case .failure(let error) = response.outcome else {
            Issue.record("not rejected")
            return
        }
        #expect(response.id == .null)
        #expect(error.code == -32700)
        #expect(error.name == "ParseError")
    }

    @Test("an invalid request object without recoverable id gets id null")
    func invalidMethodType() {
        guard case .single(let message) = parse(#"{"jsonrpc": "2.0", "method": 1, "params": "bar"}"#) else {
            Issue.record("not single")
            return
        }
        #expect(invalid(.null)(message))
    }

    @Test("an empty batch is one InvalidRequest named EmptyBatch")
    func emptyBatch() {
        guard case .rejected(let response) = parse("[]"), case .failure(let error) = response.outcome else {
            Issue.record("not rejected")
            return
        }
        #expect(response.id == .null)
        #expect(error.code == -32600)
        #expect(error.name == "EmptyBatch")
    }

    @Test("each non-object batch element is its own InvalidRequest")
    func nonObjectElements() {
        guard case .batch(let messages) = parse("[1,2,3]") else {
            Issue.record("not a batch")
            return
        }
        #expect(messages.count == 3)
        #expect(messages.allSatisfy(invalid(.null)))
        guard case .batch(let one) = parse("[1]") else { return }
        #expect(one.count == 1)
    }

    @Test("the spec's mixed batch keeps valid requests and flags the invalid one")
    func mixedBatch() {
        let line = """
            [{"jsonrpc": "2.0", "method": "sum", "params": [1,2,4], "id": "1"},
             {"jsonrpc": "2.0", "method": "notify_hello", "params": [7]},
             {"jsonrpc": "2.0", "method": "subtract", "params": [42,23], "id": "2"},
             {"foo": "boo"},
             {"jsonrpc": "2.0", "method": "foo.get", "params": {"name": "myself"}, "id": "5"},
             {"jsonrpc": "2.0", "method": "get_data", "id": "9"}]
            """.replacingOccurrences(of: "\n", with: "")
        guard case .batch(let messages) = parse(line) else {
            Issue.record("not a batch")
            return
        }
        #expect(messages.count == 6)
        #expect(messages[0] == .request(RPCRequest(id: .string("1"), method: "sum", params: [1, 2, 4])))
        #expect(messages[1] == .request(RPCRequest(id: nil, method: "notify_hello", params: [7])))
        #expect(invalid(.null)(messages[3]))
        #expect(messages[5] == .request(RPCRequest(id: .string("9"), method: "get_data")))
    }

    @Test("the id is kept when the rest of the object is invalid", arguments: [
        #"{"jsonrpc":"1.0","method":"m","id":7}"#,
        #"{"method":"m","id":7}"#,
        #"{"jsonrpc":"2.0","id":7}"#,
        #"{"jsonrpc":"2.0","method":["m"],"id":7}"#,
        #"{"jsonrpc":"2.0","method":"m","params":"bar","id":7}"#,
        #"{"jsonrpc":"2.0","method":"m","params":3,"id":7}"#,
        #"{"jsonrpc":"2.0","method":"m","params":null,"id":7}"#,
        #"{"jsonrpc":2.0,"method":"m","id":7}"#,
    ])
    func recoversID(line: String) {
        guard case .single(let message) = parse(line) else {
            Issue.record("not single")
            return
        }
        #expect(invalid(.number(7))(message))
    }

    @Test("an id of the wrong type cannot be recovered", arguments: [
        #"{"jsonrpc":"2.0","method":"m","id":{"a":1}}"#,
        #"{"jsonrpc":"2.0","method":"m","id":true}"#,
        #"{"jsonrpc":"2.0","method":"m","id":[1]}"#,
    ])
    func badIDType(line: String) {
        guard case .single(let message) = parse(line) else {
            Issue.record("not single")
            return
        }
        #expect(invalid(.null)(message))
    }

    @Test("string ids and object params pass through")
    func stringIDObjectParams() {
        let parsed = parse(#"{"jsonrpc":"2.0","method":"accounts.add","params":{"identifier":"alice"},"id":"abc"}"#)
        #expect(parsed == .single(.request(RPCRequest(id: .string("abc"), method: "accounts.add", params: ["identifier": "alice"]))))
    }
}

@Suite("RPCOutbound")
struct RPCOutboundTests {
    @Test("a reply is one line of compact JSON, newlines inside strings escaped")
    func oneLine() throws {
        let line = RPCOutbound.line(for: RPCResponse(id: .number(1), outcome: .success("a\nb")))
        #expect(line.last == UInt8(ascii: "\n"))
        #expect(line.dropLast().contains(UInt8(ascii: "\n")) == false)
        let decoded = try #require(RPCResponse(json: JSONValue.parse(line.dropLast())))
        #expect(decoded.outcome == .success("a\nb"))
    }

    @Test("a batch of notifications produces no line at all")
    func emptyBatchReply() {
        #expect(RPCOutbound.batchLine(for: []) == nil)
    }

    @Test("a batch reply keeps the order given")
    func batchOrder() throws {
        let responses = [
            RPCResponse(id: .string("b"), outcome: .success(1)),
            RPCResponse(id: .string("a"), outcome: .failure(.methodNotFound("x"))),
        ]
        let line = try #require(RPCOutbound.batchLine(for: responses))
        let array = try #require(JSONValue.parse(line.dropLast()).arrayValue)
        #expect(array.compactMap { RPCResponse(json: $0) } == responses)
    }
}
