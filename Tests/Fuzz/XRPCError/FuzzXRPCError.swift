import BlueskyHTTP
import Foundation
@testable import JSONRPC
import WebBasics

/// libFuzzer entry point: one input is the body of a failed XRPC call, read by
/// `XRPCErrorBody(response:)` (the proxy asks it whether a PDS said `ExpiredToken`).
///
/// A body reads as an error only when it names an `error` or a `message`; what it reads agrees
/// with the project's own JSON parser whenever both parsers take the body; the summary holds
/// the name; and the body written out again reads the same.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzXRPCError(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let bytes = fuzzInput(start, count)
    let response = InboundResponse(status: 400, headers: [("Content-Type", "application/json")], body: bytes)
    guard let body = XRPCErrorBody(response: response) else { return 0 }
    require(body.error != nil || body.message != nil, "an error body with neither error nor message")
    if let name = body.error {
        require(body.summary.hasPrefix(name), "the summary \(body.summary) does not start with the error \(name)")
    } else {
        require(body.summary == body.message, "the summary of a message-only body is not the message")
    }
    checkAgreement(body, bytes: bytes)

    var fields: [String: JSONValue] = [:]
    fields["error"] = body.error.map(JSONValue.string)
    fields["message"] = body.message.map(JSONValue.string)
    let rewritten = InboundResponse(status: 400, headers: [], body: JSONValue.object(fields).encoded())
    require(XRPCErrorBody(response: rewritten) == body, "the error body does not read back")
    return 0
}

/// Foundation's decoder and `JSONValue.parse` must not read different names from one body:
/// `error` decides whether the proxy refreshes a session.
private func checkAgreement(_ body: XRPCErrorBody, bytes: [UInt8]) {
    guard let object = (try? JSONValue.parse(bytes))?.objectValue else { return }
    let keys = topLevelKeys(bytes)
    // Both as people read them: a name cut to 128 bytes, a message to 512.
    let limits = ["error": 128, "message": ServerText.limit]
    for (key, decoded) in [("error", body.error), ("message", body.message)]
    where object[key]?.stringValue.map({ ServerText.clipped($0, limit: limits[key]!) }) != decoded {
        // Known: with a key given twice, JSONDecoder keeps the first value and JSONValue the last.
        require(keys.filter { $0 == key }.count > 1,
                "\(key) reads as \(String(describing: decoded)) here, \(String(describing: object[key])) in JSONValue")
        noteKnownFinding("duplicate key: JSONDecoder keeps the first, JSONValue the last")
    }
}

/// The keys of a JSON object text in the order written, repeats included (JSONValue keeps only
/// the last of each); empty when the text is not an object.
private func topLevelKeys(_ bytes: [UInt8]) -> [String] {
    bytes.withUnsafeBufferPointer { buffer in
        var parser = JSONParser(buffer)
        var keys: [String] = []
        func next(_ byte: Character) -> Bool {
            parser.skipWhitespace()
            guard parser.position < buffer.count, buffer[parser.position] == byte.asciiValue else { return false }
            parser.position += 1
            return true
        }
        guard next("{"), !next("}") else { return keys }
        repeat {
            parser.skipWhitespace()
            guard parser.position < buffer.count, buffer[parser.position] == UInt8(ascii: "\""),
                  let key = try? parser.parseString(), next(":"), (try? parser.skipValue(depth: 1)) != nil else { return keys }
            keys.append(key)
        } while next(",")
        return keys
    }
}
