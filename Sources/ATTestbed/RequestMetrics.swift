import Foundation
import Synchronization

/// Per-NSID request counters and the rate-limit window the `RateLimit-*` headers describe.
final class RequestMetrics: Sendable {
    private struct Counters {
        var byNSID: [String: Int] = [:]
        var proxiedByNSID: [String: Int] = [:]
        var window: Int64 = 0
        var usedInWindow = 0
    }

    static let rateLimit = 3000
    static let rateWindowSeconds: Int64 = 300

    private let counters = Mutex(Counters())

    /// Counts the request; returns the rate-limit headers' remaining count and reset time.
    func record(nsid: String, proxied: Bool, now: Date) -> (remaining: Int, resetAt: Int64) {
        let window = Int64(now.timeIntervalSince1970) / Self.rateWindowSeconds
        return counters.withLock { counters in
            counters.byNSID[nsid, default: 0] += 1
            if proxied { counters.proxiedByNSID[nsid, default: 0] += 1 }
            if counters.window != window {
                counters.window = window
                counters.usedInWindow = 0
            }
            counters.usedInWindow += 1
            return (max(0, Self.rateLimit - counters.usedInWindow), (window + 1) * Self.rateWindowSeconds)
        }
    }

    func count(nsid: String) -> Int { counters.withLock { $0.byNSID[nsid] ?? 0 } }

    func proxiedCount(nsid: String) -> Int { counters.withLock { $0.proxiedByNSID[nsid] ?? 0 } }

    func reset() {
        counters.withLock {
            $0.byNSID = [:]
            $0.proxiedByNSID = [:]
        }
    }
}

/// Failures a test has asked for: the next `count` calls to an NSID get this status.
final class FailureInjector: Sendable {
    struct Failure: Sendable {
        let status: Int
        var remaining: Int
        let retryAfterSeconds: Int?
        /// The error name to answer with instead of the status's usual one.
        var errorName: String? = nil
        /// Answer with an HTML page, as a proxy in front of the server would.
        var html = false
    }

    private let pending = Mutex<[String: Failure]>([:])

    func inject(nsid: String, status: Int, count: Int, retryAfterSeconds: Int?, errorName: String? = nil, html: Bool = false) {
        pending.withLock {
            $0[nsid] = count > 0
                ? Failure(status: status, remaining: count, retryAfterSeconds: retryAfterSeconds, errorName: errorName, html: html)
                : nil
        }
    }

    /// Takes one pending failure for `nsid`, if any.
    func take(nsid: String) -> Failure? {
        pending.withLock { pending in
            guard var failure = pending[nsid] else { return nil }
            failure.remaining -= 1
            pending[nsid] = failure.remaining > 0 ? failure : nil
            return failure
        }
    }

    /// How many injected failures for `nsid` are still to be served.
    func remaining(nsid: String) -> Int { pending.withLock { $0[nsid]?.remaining ?? 0 } }

    func reset() { pending.withLock { $0 = [:] } }

    /// The XRPC error name the reference stack uses for a status.
    static func errorName(status: Int) -> String {
        switch status {
        case 400: "InvalidRequest"
        case 401: "AuthenticationRequired"
        case 403: "Forbidden"
        case 404: "NotFound"
        case 413: "PayloadTooLarge"
        case 429: "RateLimitExceeded"
        case 501: "MethodNotImplemented"
        case 502: "UpstreamFailure"
        case 504: "UpstreamTimeout"
        default: "InternalServerError"
        }
    }
}
