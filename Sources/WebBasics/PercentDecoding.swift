/// `%XX` escapes turned back into bytes, as URLs, forms and OAuth scopes write them.
public enum PercentDecoding {
    /// `text` with each `%XX` made its byte, and `+` a space when `plusIsSpace` (form encoding);
    /// nil for a broken escape or bytes that are not UTF-8.
    public static func decode(_ text: some StringProtocol, plusIsSpace: Bool) -> String? {
        var output: [UInt8] = []
        var bytes = Array(text.utf8)[...]
        while let byte = bytes.popFirst() {
            switch byte {
            case UInt8(ascii: "+") where plusIsSpace:
                output.append(UInt8(ascii: " "))
            case UInt8(ascii: "%"):
                guard let high = bytes.popFirst().flatMap(hexValue), let low = bytes.popFirst().flatMap(hexValue) else { return nil }
                output.append(high << 4 | low)
            default:
                output.append(byte)
            }
        }
        return String(validating: output, as: UTF8.self)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
