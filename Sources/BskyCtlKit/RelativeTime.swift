import FoundationEssentials

/// Short relative times for tables: "in 1h 12m", "5m ago", "expired".
public enum RelativeTime {
    /// A duration in its two largest units: "2d 3h", "1h 12m", "45m", "30s".
    public static func duration(seconds: Double) -> String {
        let total = max(0, Int(seconds.rounded(.down)))
        let days = total / 86_400, hours = total % 86_400 / 3_600
        let minutes = total % 3_600 / 60, secs = total % 60
        let units = [(days, "d"), (hours, "h"), (minutes, "m"), (secs, "s")]
        guard let first = units.firstIndex(where: { $0.0 > 0 }) else { return "0s" }
        return units[first...].prefix(2).filter { $0.0 > 0 }.map { "\($0.0)\($0.1)" }.joined(separator: " ")
    }

    /// When something expires: "in 1h 12m", or "expired" once `date` is not after `now`.
    public static func expiry(_ date: Date, now: Date) -> String {
        let remaining = date.timeIntervalSince(now)
        return remaining > 0 ? "in " + duration(seconds: remaining) : "expired"
    }

    /// When something will happen: "in 1h 12m", or "now" when it is due.
    public static func upcoming(_ date: Date, now: Date) -> String {
        let remaining = date.timeIntervalSince(now)
        return remaining >= 1 ? "in " + duration(seconds: remaining) : "now"
    }

    /// When something happened: "5m ago", or "just now" under a second (or in the future,
    /// which only clock skew between daemon and client can produce).
    public static func past(_ date: Date, now: Date) -> String {
        let elapsed = now.timeIntervalSince(date)
        return elapsed >= 1 ? duration(seconds: elapsed) + " ago" : "just now"
    }
}

/// RFC 3339 timestamps as the daemon writes them (UTC, with or without fractional seconds).
public enum Timestamp {
    public static func parse(_ text: String) -> Date? {
        if let date = try? Date.ISO8601FormatStyle(includingFractionalSeconds: true).parse(text) { return date }
        return try? Date.ISO8601FormatStyle().parse(text)
    }

    /// A date as the daemon would write it, for showing an exact time next to a relative one.
    public static func format(_ date: Date) -> String {
        date.formatted(Date.ISO8601FormatStyle())
    }
}
