import Foundation

extension InboundResponse {
    /// Seconds the server asked the client to wait, from `Retry-After` (seconds or an HTTP
    /// date) or, failing that, `RateLimit-Reset` (the reference PDS sends a Unix time; the
    /// IETF draft a number of seconds, which a value below 10^9 is read as). Nil when it said
    /// nothing readable. Sent with any status: a 503 page behind a proxy carries it too.
    public func serverAskedWait(now: Date = Date()) -> TimeInterval? {
        if let value = header("retry-after")?.trimmingCharacters(in: .whitespaces) {
            if let seconds = Self.wholeSeconds(value) { return seconds }
            if let date = Self.httpDate(value) { return max(0, date.timeIntervalSince(now)) }
        }
        if let reset = header("ratelimit-reset").flatMap({ Self.wholeSeconds($0.trimmingCharacters(in: .whitespaces)) }) {
            return reset < 1_000_000_000 ? reset : max(0, reset - now.timeIntervalSince1970)
        }
        return nil
    }

    /// A non-negative whole number of seconds (RFC 9110 delay-seconds), nil for anything else.
    static func wholeSeconds(_ text: String) -> TimeInterval? {
        guard !text.isEmpty, text.utf8.count <= 15, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        return TimeInterval(text)
    }

    /// An HTTP date in any of RFC 9110's three forms (IMF-fixdate, RFC 850, asctime).
    static func httpDate(_ text: String) -> Date? {
        for format in httpDateFormats {
            let formatter = DateFormatter()
            formatter.locale = Locale(identifier: "en_US_POSIX")
            formatter.timeZone = TimeZone(identifier: "GMT")
            formatter.dateFormat = format
            if let date = formatter.date(from: text) { return date }
        }
        return nil
    }

    private static let httpDateFormats = [
        "EEE, dd MMM yyyy HH:mm:ss zzz", "EEEE, dd-MMM-yy HH:mm:ss zzz", "EEE MMM d HH:mm:ss yyyy",
    ]
}
