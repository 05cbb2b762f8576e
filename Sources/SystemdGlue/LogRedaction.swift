/// The last line of defence against secrets in the logs.
///
/// Code never logs a token on purpose; this catches one that slips in through an error's
/// description (an upstream body echoing a request, say). It rewrites anything shaped like a
/// JWT (what atproto access and refresh tokens are) before a line leaves the process.
public enum LogRedaction {
    public static let placeholder = "[redacted]"

    /// `text` with every JWT-shaped run (`eyJ…` base64url, at least two dots) replaced.
    public static func redact(_ text: String) -> String {
        // Fast path: almost every line has no "eyJ" at all.
        guard text.utf8.count >= 3, text.contains("eyJ") else { return text }
        var output = ""
        output.reserveCapacity(text.utf8.count)
        var rest = Substring(text)
        while let start = rest.range(of: "eyJ") {
            output += rest[..<start.lowerBound]
            let candidate = rest[start.lowerBound...].prefix { isTokenCharacter($0) }
            if candidate.filter({ $0 == "." }).count >= 2 && candidate.count >= 20 {
                output += placeholder
            } else {
                output += candidate
            }
            rest = rest[candidate.endIndex...]
        }
        output += rest
        return output
    }

    private static func isTokenCharacter(_ c: Character) -> Bool {
        c.isASCII && (c.isLetter || c.isNumber || c == "-" || c == "_" || c == "." || c == "=")
    }
}
