import Foundation

/// Exponential backoff with jitter: refreshes after transient failures, and every retry against
/// a store or database. One type, so that every loop that tries again waits the same way.
public struct Backoff: Sendable, Equatable {
    public var initial: Duration
    public var maximum: Duration

    public init(initial: Duration, maximum: Duration) {
        self.initial = initial
        self.maximum = maximum
    }

    /// Trying a store or database again (due dates, takes, other hosts' changes, the
    /// listening connection): 0.5 s doubling to 30 s.
    public static let storeRetry = Backoff(initial: .milliseconds(500), maximum: .seconds(30))

    /// The longest wait a server's Retry-After is taken at its word for; beyond it, a date
    /// decades away would stop the account for good on one bad header.
    public static let longestServerWait: TimeInterval = 7 * 24 * 3600

    /// Seconds to wait before attempt `attempt` (1-based), jittered down by up to 20 % so that
    /// hosts and accounts that failed together do not all come back in the same instant. What
    /// the server asked for (Retry-After, RateLimit-Reset) is never shortened, not even to
    /// `maximum`.
    public func delay(attempt: Int, serverAsked: TimeInterval? = nil) -> TimeInterval {
        let base = initial.seconds * pow(2, Double(min(max(0, attempt - 1), 40)))
        let capped = min(maximum.seconds, base)
        let jittered = capped * Double.random(in: 0.8...1.0)
        return max(jittered, min(serverAsked ?? 0, Self.longestServerWait))
    }
}

extension Duration {
    /// This duration in (fractional) seconds.
    public var seconds: TimeInterval {
        let (s, attoseconds) = components
        return TimeInterval(s) + TimeInterval(attoseconds) / 1e18
    }
}
