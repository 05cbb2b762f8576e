/// The few pieces of the DNS wire format (RFC 1035) a TXT lookup needs.
enum DNSRecordType {
    static let cname: UInt16 = 5
    static let txt: UInt16 = 16
}

enum DNSResponseCode {
    static let noError: UInt8 = 0
    static let serverFailure: UInt8 = 2
    static let nameError: UInt8 = 3
    static let refused: UInt8 = 5
}

/// Why a message could not be built or read.
struct DNSFormatError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

struct DNSQuestion: Equatable, Sendable {
    /// Lowercase, without the trailing dot.
    var name: String
    var type: UInt16
    var recordClass: UInt16 = 1
}

/// A standard recursive query with one question.
struct DNSQuery: Sendable {
    let id: UInt16
    let question: DNSQuestion

    init(id: UInt16 = .random(in: 0...UInt16.max), name: String, type: UInt16) {
        self.id = id
        self.question = DNSQuestion(name: DNSName.normalised(name), type: type)
    }

    /// The query on the wire. No EDNS: UDP answers stay within 512 bytes and larger ones come
    /// back truncated, which the resolver then asks again over TCP.
    func encoded() throws(DNSFormatError) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.appendUInt16(id)
        bytes.appendUInt16(0x0100)  // QR=0 (query), opcode 0, RD=1 (recursion desired)
        bytes.appendUInt16(1)  // QDCOUNT
        bytes.appendUInt16(0)  // ANCOUNT
        bytes.appendUInt16(0)  // NSCOUNT
        bytes.appendUInt16(0)  // ARCOUNT
        bytes += try DNSName.encoded(question.name)
        bytes.appendUInt16(question.type)
        bytes.appendUInt16(question.recordClass)
        return bytes
    }
}

/// One resource record of the answer section.
struct DNSRecord: Sendable {
    var name: String
    var type: UInt16
    /// For CNAME records: the canonical name.
    var canonicalName: String?
    /// For TXT records: the record's character-strings, in order.
    var characterStrings: [[UInt8]] = []
}

/// A parsed response: header flags, the echoed question and the answer records.
struct DNSResponse: Sendable {
    var id: UInt16
    var isResponse: Bool
    var isTruncated: Bool
    var responseCode: UInt8
    var questions: [DNSQuestion]
    var answers: [DNSRecord]

    init(parsing bytes: [UInt8]) throws(DNSFormatError) {
        var reader = DNSReader(bytes)
        id = try reader.readUInt16()
        let flags = try reader.readUInt16()
        isResponse = flags & 0x8000 != 0
        isTruncated = flags & 0x0200 != 0
        responseCode = UInt8(flags & 0x000F)
        let questionCount = try reader.readUInt16()
        let answerCount = try reader.readUInt16()
        _ = try reader.readUInt16()  // authority records: not needed
        _ = try reader.readUInt16()  // additional records: not needed

        questions = []
        for _ in 0..<questionCount {
            let name = try reader.readName()
            let type = try reader.readUInt16()
            let recordClass = try reader.readUInt16()
            questions.append(DNSQuestion(name: name, type: type, recordClass: recordClass))
        }
        answers = []
        for _ in 0..<answerCount {
            // A truncated answer may stop mid-record: keep what was complete.
            guard let record = try? reader.readRecord() else {
                if isTruncated { break }
                throw DNSFormatError("answer section is cut short")
            }
            answers.append(record)
        }
    }

    /// True if this is the answer to `query` (same id, a response, the same question).
    func answers(_ query: DNSQuery) -> Bool {
        id == query.id && isResponse && questions == [query.question]
    }

    /// The TXT values for `name`, following CNAMEs; each record's character-strings are
    /// concatenated into one value (long values are split into 255-byte strings on the wire).
    func txtValues(for name: String) -> [String] {
        var owners: Set<String> = [DNSName.normalised(name)]
        // CNAME chains may be listed in any order; a bounded fixpoint over the section.
        for _ in 0..<8 {
            let before = owners.count
            for record in answers where record.type == DNSRecordType.cname && owners.contains(record.name) {
                if let target = record.canonicalName { owners.insert(target) }
            }
            if owners.count == before { break }
        }
        return answers
            .filter { $0.type == DNSRecordType.txt && owners.contains($0.name) }
            .map { String(decoding: $0.characterStrings.joined(), as: UTF8.self) }
    }
}

enum DNSName {
    static let maxLength = 253

    static func normalised(_ name: String) -> String {
        var name = name.lowercased()
        if name.hasSuffix(".") { name.removeLast() }
        return name
    }

    static func encoded(_ name: String) throws(DNSFormatError) -> [UInt8] {
        guard name.utf8.count <= maxLength else {
            throw DNSFormatError("name \(name) is longer than \(maxLength) characters")
        }
        var bytes: [UInt8] = []
        for label in name.split(separator: ".", omittingEmptySubsequences: false) {
            guard (1...63).contains(label.utf8.count) else {
                throw DNSFormatError("name \(name) has an empty or over-long label")
            }
            bytes.append(UInt8(label.utf8.count))
            bytes += label.utf8
        }
        bytes.append(0)
        return bytes
    }
}

extension [UInt8] {
    mutating func appendUInt16(_ value: UInt16) {
        append(UInt8(value >> 8))
        append(UInt8(value & 0xFF))
    }
}
