import Foundation
import Synchronization

/// How far a server's clock is from ours, learnt from its `Date` headers.
///
/// Servers reject proofs whose `iat` is more than about 10 seconds off their own clock, so a
/// machine whose clock drifted would fail every request. Each response's `Date` gives one
/// sample; the estimate is the median of the recent samples, so one slow response (whose `Date`
/// was written long before we read it) does not move it.
public final class ClockSkewEstimator: Sendable {
    /// How many recent samples the median is taken over.
    public static let sampleLimit = 7

    private let samples = Mutex<[TimeInterval]>([])

    public init() {}

    /// Seconds to add to the local clock to get the server's; 0 until the first sample.
    public var offset: TimeInterval {
        samples.withLock { samples in
            guard !samples.isEmpty else { return 0 }
            let sorted = samples.sorted()
            return sorted[sorted.count / 2]
        }
    }

    /// Records the server's `Date` header value as read at local time `receivedAt`; ignores
    /// values that are not HTTP dates.
    public func record(dateHeader: String?, receivedAt: Date) {
        guard let dateHeader, let serverDate = HTTPDate.parse(dateHeader) else { return }
        record(serverDate: serverDate, receivedAt: receivedAt)
    }

    /// Records one sample: the server said `serverDate` when our clock said `receivedAt`.
    public func record(serverDate: Date, receivedAt: Date) {
        // `Date` has whole seconds and is truncated: on average the server's clock was half a
        // second past what it wrote.
        let sample = serverDate.timeIntervalSince(receivedAt) + 0.5
        samples.withLock { samples in
            samples.append(sample)
            if samples.count > Self.sampleLimit { samples.removeFirst(samples.count - Self.sampleLimit) }
        }
    }

    /// A server refused a proof (its `iat` too old or too new) that was signed with the offset
    /// `signedWith`: when the refusal's `Date` is more than `threshold` seconds from it, the
    /// server's clock stepped. The estimate starts over from this sample (unless others have
    /// already caught up), and the answer is true: sign again once. A refusal the `Date` does
    /// not explain changes nothing (false).
    public func resynchronize(dateHeader: String?, receivedAt: Date, signedWith: TimeInterval,
                              threshold: TimeInterval = 5) -> Bool {
        guard let dateHeader, let serverDate = HTTPDate.parse(dateHeader) else { return false }
        let sample = serverDate.timeIntervalSince(receivedAt) + 0.5
        guard abs(sample - signedWith) > threshold else { return false }
        samples.withLock { samples in
            let sorted = samples.sorted()
            let current = sorted.isEmpty ? 0 : sorted[sorted.count / 2]
            if abs(sample - current) > threshold { samples = [sample] }
        }
        return true
    }
}
