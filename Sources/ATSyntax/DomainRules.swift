/// Rules shared by handles and NSID authorities, which are both DNS names.
enum DomainRules {
    static let maxLabelLength = 63

    static func isASCIILetter(_ byte: UInt8) -> Bool {
        (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z"))
            || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
    }

    static func isASCIIDigit(_ byte: UInt8) -> Bool {
        byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")
    }

    static func isASCIIAlphanumeric(_ byte: UInt8) -> Bool {
        isASCIILetter(byte) || isASCIIDigit(byte)
    }

    /// Checks one DNS label (letters, digits, inner hyphens, 1-63 characters).
    /// Returns the broken rule, or nil when the label is fine.
    static func labelProblem(_ label: Substring.UTF8View) -> String? {
        guard let first = label.first, let last = label.last else {
            return "empty segment (two dots in a row, or a leading or trailing dot)"
        }
        if label.count > maxLabelLength {
            return "segment longer than \(maxLabelLength) characters"
        }
        if !label.allSatisfy({ isASCIIAlphanumeric($0) || $0 == UInt8(ascii: "-") }) {
            return "segment \"\(String(Substring(label)))\" has characters other than ASCII letters, digits and hyphens"
        }
        if first == UInt8(ascii: "-") || last == UInt8(ascii: "-") {
            return "segment \"\(String(Substring(label)))\" starts or ends with a hyphen"
        }
        return nil
    }
}
