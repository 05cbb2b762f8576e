/// A server's own words kept for a person to read: an error's name and message, a refusal's
/// description. They end up in the account's state reason (stored), in logs and in commands'
/// reports, so a hostile server's 30 MB message must not be carried whole: it is cut to
/// `limit` bytes of UTF-8, at a character boundary, and marked as cut.
public enum ServerText {
    /// Longer than any reason a reference server gives (the PDS's and the authorization server's
    /// are under 100 bytes).
    public static let limit = 512

    /// At most `limit` bytes, the mark included (for a limit longer than the mark), so that
    /// clipping what was clipped changes nothing: a body written out again reads the same.
    public static func clipped(_ text: String, limit: Int = limit) -> String {
        guard text.utf8.count > limit else { return text }
        let mark = "… (\(text.utf8.count) bytes, cut)"
        let budget = max(0, limit - mark.utf8.count)
        var kept = ""
        var bytes = 0
        for character in text {
            let size = character.utf8.count
            guard bytes + size <= budget else { break }
            kept.append(character)
            bytes += size
        }
        return kept + mark
    }

    public static func clipped(_ text: String?, limit: Int = limit) -> String? {
        text.map { clipped($0, limit: limit) }
    }
}
