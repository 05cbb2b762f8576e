/// A bounds-checked cursor over a DNS message, with name decompression (RFC 1035 §4.1.4).
struct DNSReader {
    private let bytes: [UInt8]
    private(set) var offset = 0

    init(_ bytes: [UInt8]) {
        self.bytes = bytes
    }

    mutating func readUInt8() throws(DNSFormatError) -> UInt8 {
        guard offset < bytes.count else { throw DNSFormatError("message ends early") }
        defer { offset += 1 }
        return bytes[offset]
    }

    mutating func readUInt16() throws(DNSFormatError) -> UInt16 {
        let high = try readUInt8()
        let low = try readUInt8()
        return UInt16(high) << 8 | UInt16(low)
    }

    mutating func readUInt32() throws(DNSFormatError) -> UInt32 {
        let high = try readUInt16()
        let low = try readUInt16()
        return UInt32(high) << 16 | UInt32(low)
    }

    mutating func readBytes(_ count: Int) throws(DNSFormatError) -> [UInt8] {
        guard count >= 0, offset + count <= bytes.count else { throw DNSFormatError("message ends early") }
        defer { offset += count }
        return Array(bytes[offset..<offset + count])
    }

    /// Reads a possibly compressed name; the cursor ends after the name's in-place part.
    mutating func readName() throws(DNSFormatError) -> String {
        var labels: [String] = []
        var position = offset
        var resumeAt: Int?
        var jumps = 0
        var length = 0
        while true {
            guard position < bytes.count else { throw DNSFormatError("name runs past the end") }
            let lengthByte = bytes[position]
            switch lengthByte & 0xC0 {
            case 0xC0:
                guard position + 1 < bytes.count else { throw DNSFormatError("name pointer runs past the end") }
                let target = Int(lengthByte & 0x3F) << 8 | Int(bytes[position + 1])
                // Pointers must go backwards: this (and the jump limit) rules out loops.
                guard target < position, jumps < 64 else { throw DNSFormatError("name compression loop") }
                if resumeAt == nil { resumeAt = position + 2 }
                jumps += 1
                position = target
            case 0x00:
                let labelLength = Int(lengthByte)
                if labelLength == 0 {
                    offset = resumeAt ?? position + 1
                    return labels.joined(separator: ".").lowercased()
                }
                guard position + 1 + labelLength <= bytes.count else { throw DNSFormatError("label runs past the end") }
                length += labelLength + 1
                guard length <= 255 else { throw DNSFormatError("name longer than 255 bytes") }
                labels.append(String(decoding: bytes[(position + 1)...(position + labelLength)], as: UTF8.self))
                position += 1 + labelLength
            default:
                throw DNSFormatError("unknown label type")
            }
        }
    }

    /// Reads one resource record, decoding the types a TXT lookup cares about.
    mutating func readRecord() throws(DNSFormatError) -> DNSRecord {
        let name = try readName()
        let type = try readUInt16()
        _ = try readUInt16()  // class
        _ = try readUInt32()  // TTL: our cache has its own, shorter lifetime
        let dataLength = Int(try readUInt16())
        let dataStart = offset
        guard dataStart + dataLength <= bytes.count else { throw DNSFormatError("record data runs past the end") }
        var record = DNSRecord(name: name, type: type)
        switch type {
        case DNSRecordType.cname:
            record.canonicalName = try readName()
        case DNSRecordType.txt:
            while offset < dataStart + dataLength {
                let stringLength = Int(try readUInt8())
                guard offset + stringLength <= dataStart + dataLength else {
                    throw DNSFormatError("TXT string runs past its record")
                }
                record.characterStrings.append(try readBytes(stringLength))
            }
        default:
            break
        }
        offset = dataStart + dataLength
        return record
    }
}
