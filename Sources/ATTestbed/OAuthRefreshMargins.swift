import Foundation
import Synchronization

/// One refresh grant as the authorization server saw it: when it rotated the session's tokens,
/// and how long the session's newest access token still had to live at that moment.
public struct OAuthRefreshMargin: Sendable, Equatable, Codable {
    /// The session's account.
    public var did: String
    /// When the grant was processed (the testbed's clock), before any `refreshLatency`.
    public var refreshedAt: Date
    /// The expiry of the access token the session held before this refresh, minus
    /// `refreshedAt`, in seconds. Negative: that token had lapsed before the client refreshed.
    public var seconds: Double

    public init(did: String, refreshedAt: Date, seconds: Double) {
        self.did = did
        self.refreshedAt = refreshedAt
        self.seconds = seconds
    }

    /// The client let the token lapse: calls made with it in the meantime would have been refused.
    public var lapsed: Bool { seconds < 0 }
}

/// Every rotating refresh grant's margin, in the order processed, so a benchmark can tell how
/// close to expiry a client refreshes under load (and whether it ever lets a token lapse).
final class RefreshMarginLog: Sendable {
    /// Far beyond any run's refreshes (a few dozen bytes each), but a bound for a testbed left running:
    /// past it, margins are no longer kept (the counters in `OAuthStats` still count).
    static let capacity = 1_000_000

    private let entries = Mutex<[OAuthRefreshMargin]>([])

    func record(_ margin: OAuthRefreshMargin) {
        entries.withLock { entries in
            if entries.count < Self.capacity { entries.append(margin) }
        }
    }

    var all: [OAuthRefreshMargin] { entries.withLock { $0 } }

    func reset() { entries.withLock { $0 = [] } }
}
