/// libFuzzer entry point: one input is a DNS message as a nameserver sends it back (UDP
/// payload, or a TCP message without its length prefix), read by `DNSResponse(parsing:)`.
///
/// For every message that parses: the header counts and flags are reported as sent; names are
/// lowercase; the TXT values come from TXT records, found case-insensitively; and the message
/// written out again without compression reads back the same. Every name read also makes a
/// query (`DNSQuery`) whose encoding parses back to the same question, and which a response
/// carrying that question is recognised as answering.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzDNS(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let message = fuzzInput(start, count)
    guard let response = try? DNSResponse(parsing: message) else { return 0 }
    checkHeader(response, message: message)
    let names = response.questions.map(\.name) + response.answers.flatMap { [$0.name] + ($0.canonicalName.map { [$0] } ?? []) }
    for name in names {
        require(!name.utf8.contains { $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z") }, "the name \(name) is not lowercase")
    }
    checkTXTValues(response, names: names)
    let flags = UInt16(message[2]) << 8 | UInt16(message[3])
    if let rewritten = encoded(response, flags: flags) {
        checkSame(try? DNSResponse(parsing: rewritten), response)
    }
    for name in Set(names) {
        checkQuery(name: name, type: response.questions.first?.type ?? DNSRecordType.txt)
    }
    return 0
}

private func checkHeader(_ response: DNSResponse, message: [UInt8]) {
    let word = { (offset: Int) in UInt16(message[offset]) << 8 | UInt16(message[offset + 1]) }
    require(response.id == word(0), "the id is not the one sent")
    require(response.isResponse == (message[2] & 0x80 != 0), "QR is misread")
    require(response.isTruncated == (message[2] & 0x02 != 0), "TC is misread")
    require(response.responseCode == message[3] & 0x0F, "RCODE is misread")
    require(response.questions.count == Int(word(4)), "\(response.questions.count) questions, QDCOUNT \(word(4))")
    // Only a truncated answer may hold fewer records than it announces.
    let announced = Int(word(6))
    require(response.isTruncated ? response.answers.count <= announced : response.answers.count == announced,
            "\(response.answers.count) answers, ANCOUNT \(announced)")
}

private func checkTXTValues(_ response: DNSResponse, names: [String]) {
    let records = response.answers.filter { $0.type == DNSRecordType.txt }
    let recordValues = Set(records.map { String(decoding: $0.characterStrings.joined(), as: UTF8.self) })
    for name in Set(names) {
        let values = response.txtValues(for: name)
        require(values.count <= records.count, "more TXT values than TXT records")
        require(values.allSatisfy(recordValues.contains), "a TXT value that no TXT record holds")
        // A name read from a label holding a dot may end in one, which the lookup strips.
        if name.utf8.allSatisfy({ $0 < 0x80 }), !name.hasSuffix(".") {
            require(response.txtValues(for: name.uppercased() + ".") == values, "the lookup of \(name) depends on case or the root dot")
        }
    }
}

/// A query's encoding is a message the response reader takes, with the same question.
private func checkQuery(name: String, type: UInt16) {
    let query = DNSQuery(id: 0x1234, name: name, type: type)
    guard var bytes = try? query.encoded() else { return }
    let echoed = try? DNSResponse(parsing: bytes)
    require(echoed?.questions == [query.question], "the query for \(name) reads back as \(String(describing: echoed?.questions))")
    require(echoed?.answers(query) == false, "a query is taken for its own answer")
    bytes[2] |= 0x80  // QR: the same message as the server's response
    require((try? DNSResponse(parsing: bytes))?.answers(query) == true, "a response echoing the question of \(name) is not recognised")
}

/// The response as a message without name compression; nil when a name cannot be written
/// (an empty or over-long label after decoding, or an over-long name).
private func encoded(_ response: DNSResponse, flags: UInt16) -> [UInt8]? {
    var bytes: [UInt8] = []
    for word in [response.id, flags, UInt16(response.questions.count), UInt16(response.answers.count), 0, 0] {
        bytes.appendUInt16(word)
    }
    for question in response.questions {
        guard let name = encodedName(question.name) else { return nil }
        bytes += name
        bytes.appendUInt16(question.type)
        bytes.appendUInt16(question.recordClass)
    }
    for record in response.answers {
        guard let name = encodedName(record.name) else { return nil }
        var data: [UInt8] = []
        if record.type == DNSRecordType.cname {
            guard let target = record.canonicalName.flatMap(encodedName) else { return nil }
            data = target
        } else if record.type == DNSRecordType.txt {
            for string in record.characterStrings {
                data.append(UInt8(string.count))
                data += string
            }
        }
        bytes += name
        bytes.appendUInt16(record.type)
        bytes.appendUInt16(1)  // class IN
        bytes += [0, 0, 0, 0]  // TTL
        bytes.appendUInt16(UInt16(data.count))
        bytes += data
    }
    return bytes
}

private func encodedName(_ name: String) -> [UInt8]? {
    var bytes: [UInt8] = []
    if !name.isEmpty {
        for label in name.utf8.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false) {
            guard (1...63).contains(label.count) else { return nil }
            bytes.append(UInt8(label.count))
            bytes += label
        }
    }
    bytes.append(0)
    return bytes.count - 1 <= 255 ? bytes : nil
}

private func checkSame(_ reread: DNSResponse?, _ original: DNSResponse) {
    guard let reread else { return require(false, "the rewritten message does not parse") }
    require(reread.id == original.id && reread.isResponse == original.isResponse
            && reread.isTruncated == original.isTruncated && reread.responseCode == original.responseCode,
            "the rewritten header reads differently")
    require(reread.questions == original.questions, "the rewritten questions read as \(reread.questions)")
    require(reread.answers.count == original.answers.count, "the rewritten answers differ in number")
    for (again, first) in zip(reread.answers, original.answers) {
        require(again.name == first.name && again.type == first.type && again.canonicalName == first.canonicalName
                && again.characterStrings == first.characterStrings, "the rewritten record \(first) reads as \(again)")
    }
}
