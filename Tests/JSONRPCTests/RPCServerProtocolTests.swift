import Foundation
import JSONRPC
import RPCServer
import Testing

/// Every JSON-RPC error case, over a real socket, on one connection that stays usable.
@Suite("RPCServer protocol errors")
struct RPCServerProtocolTests {
    @Test("each malformed line gets its error, and the connection keeps working")
    func errorCases() async throws {
        try await withServer { server in
            let client = try await server.connect()
            let cases: [(line: String, code: Int, name: String, id: JSONValue)] = [
                (#"{"jsonrpc":"2.0","method":"echo","id":1"#, -32700, "ParseError", .null),
                (#"{"jsonrpc":"1.0","method":"echo","id":2}"#, -32600, "InvalidRequest", 2),
                (#"{"method":"echo","id":3}"#, -32600, "InvalidRequest", 3),
                (#"{"jsonrpc":"2.0","id":4}"#, -32600, "InvalidRequest", 4),
                (#"{"jsonrpc":"2.0","method":"echo","params":"bar","id":5}"#, -32600, "InvalidRequest", 5),
                (#"{"jsonrpc":"2.0","method":"no.such.method","id":"6"}"#, -32601, "MethodNotFound", "6"),
                (#"{"jsonrpc":"2.0","method":"fail","id":7}"#, -32602, "InvalidParams", 7),
                ("[]", -32600, "EmptyBatch", .null),
                (#"{"jsonrpc":"2.0","method":1,"params":"bar"}"#, -32600, "InvalidRequest", .null),
                (#"{"jsonrpc":"2.0","method":"echo","id":{"no":"objects"}}"#, -32600, "InvalidRequest", .null),
            ]
            for testCase in cases {
                try await client.send(testCase.line)
                let reply = try #require(try await client.readReply(), "no reply to \(testCase.line)")
                #expect(reply["jsonrpc"] == "2.0")
                #expect(reply["id"] == testCase.id, "\(testCase.line)")
                #expect(reply["error"]?["code"]?.intValue == testCase.code, "\(testCase.line)")
                #expect(errorName(reply) == testCase.name, "\(testCase.line)")
                #expect(reply["error"]?["message"]?.stringValue?.isEmpty == false)
            }
            #expect(try await client.call("echo", ["still": "alive"]) == .success(["still": "alive"]))
        }
    }

    @Test("integer ids beyond 2^53 come back digit for digit; ordinary ids and params are unchanged")
    func largeIntegerIDs() async throws {
        try await withServer { server in
            let client = try await server.connect()
            for id in ["9007199254740993", "12345678901234567890", "-98765432109876543210", "1234567890123456"] {
                try await client.send(#"{"jsonrpc":"2.0","method":"echo","params":{"n":1},"id":"# + id + "}")
                let line = try #require(try await client.readRawLine(), "no reply to id \(id)")
                #expect(line.contains(#""id":"# + id + ","), "\(line)")
            }
            #expect(try await client.call("echo", ["n": 2.5]) == .success(["n": 2.5]))
        }
    }

    @Test("the spec's mixed batch: replies for requests and invalid elements, none for notifications")
    func mixedBatch() async throws {
        try await withServer { server in
            let client = try await server.connect()
            try await client.send(#"""
                [{"jsonrpc":"2.0","method":"echo","params":[1,2,4],"id":"1"},\#
                {"jsonrpc":"2.0","method":"echo","params":[7]},\#
                {"jsonrpc":"2.0","method":"echo","params":[42,23],"id":"2"},\#
                {"foo":"boo"},\#
                {"jsonrpc":"2.0","method":"foo.get","params":{"name":"myself"},"id":"5"},\#
                {"jsonrpc":"2.0","method":"echo","id":"9"}]
                """#)
            let replies = try #require(try await client.readReply()?.arrayValue)
            #expect(replies.map { $0["id"] } == ["1", "2", .null, "5", "9"])
            #expect(replies[0]["result"] == [1, 2, 4])
            #expect(errorName(replies[2]) == "InvalidRequest")
            #expect(errorName(replies[3]) == "MethodNotFound")
            #expect(replies[4]["result"] == .null)
        }
    }

    @Test("non-object batch elements each get an InvalidRequest")
    func numbersBatch() async throws {
        try await withServer { server in
            let client = try await server.connect()
            try await client.send("[1,2,3]")
            let replies = try #require(try await client.readReply()?.arrayValue)
            #expect(replies.count == 3)
            #expect(replies.allSatisfy { errorName($0) == "InvalidRequest" && $0["id"] == .null })
        }
    }

    @Test("notifications, alone or in a batch, get no reply")
    func notificationsAreSilent() async throws {
        let handler = TestHandler()
        try await withServer(handler: handler) { server in
            let client = try await server.connect()
            try await client.send(#"{"jsonrpc":"2.0","method":"echo","params":{"tag":"n1"}}"#)
            try await client.send(#"[{"jsonrpc":"2.0","method":"echo","params":{"tag":"n2"}},{"jsonrpc":"2.0","method":"nope"}]"#)
            try await client.send(#"{"jsonrpc":"2.0","method":"echo","params":{"tag":"after"},"id":"after"}"#)
            let reply = try #require(try await client.readReply())
            #expect(reply["id"] == "after")
            // The notifications did run: they were just not answered.
            await handler.events.waitFor("finished:n1")
            await handler.events.waitFor("finished:n2")
        }
    }

    @Test("an overlong line is answered with LineTooLong and the connection still works")
    func overlongLine() async throws {
        try await withServer(configuration: .init(maxLineBytes: 1024)) { server in
            let client = try await server.connect()
            let padding = String(repeating: "x", count: 200_000)
            try await client.send(#"{"jsonrpc":"2.0","method":"echo","params":["\#(padding)"],"id":1}"#)
            let reply = try #require(try await client.readReply())
            #expect(reply["id"] == .null)
            #expect(reply["error"]?["code"]?.intValue == -32600)
            #expect(errorName(reply) == "LineTooLong")
            #expect(try await client.call("echo", ["fits"]) == .success(["fits"]))
        }
    }

    @Test("CRLF line endings are accepted and blank lines are skipped")
    func crlfAndBlankLines() async throws {
        try await withServer { server in
            let client = try await server.connect()
            try await client.send("\r\n")
            try await client.send(#"{"jsonrpc":"2.0","method":"echo","params":["crlf"],"id":1}"# + "\r\n")
            let reply = try #require(try await client.readReply())
            #expect(reply["id"] == 1)
            #expect(reply["result"] == ["crlf"])
        }
    }

    @Test("the handler learns the caller's uid and pid")
    func callContext() async throws {
        try await withServer { server in
            let client = try await server.connect()
            let who = try await client.call("whoami").get()
            #expect(who["uid"]?.intValue == Int(getuid()))
            #expect(who["pid"]?.intValue == Int(getpid()))
        }
    }
}
