import Foundation
import Synchronization

/// Random spreading of due dates. Not a secret, so not the system generator: that one costs a
/// getrandom(2) call per number, and a start with 100,000 accounts draws 200,000 of them.
enum Jitter {
    /// The largest factor a refresh's lead time is stretched by (up to 20 % earlier).
    static let widest = 1.2

    private static let state = Mutex<UInt64>(UInt64.random(in: 1...UInt64.max))

    /// A uniformly drawn number in `range` (SplitMix64 under a lock).
    static func uniform(in range: ClosedRange<Double>) -> Double {
        range.lowerBound + (range.upperBound - range.lowerBound) * unit()
    }

    static func uniform(in range: Range<Double>) -> Double {
        range.lowerBound + (range.upperBound - range.lowerBound) * unit()
    }

    /// The stretch of an account's lead time, in [1, `widest`): drawn from the account and its
    /// tokens' issue time, so that it is the same whenever (and on whichever host) the same
    /// tokens' date is worked out, and different for the next tokens.
    static func stretch(of account: UUID, issued: Date) -> Double {
        let (high, low) = withUnsafeBytes(of: account.uuid) { ($0.load(fromByteOffset: 0, as: UInt64.self),
                                                                $0.load(fromByteOffset: 8, as: UInt64.self)) }
        let bits = mix(high ^ mix(low ^ issued.timeIntervalSinceReferenceDate.bitPattern))
        return 1 + (widest - 1) * (Double(bits >> 11) * 0x1.0p-53)
    }

    /// SplitMix64's finaliser: every input bit moves every output bit.
    private static func mix(_ value: UInt64) -> UInt64 {
        var z = value &+ 0x9E37_79B9_7F4A_7C15
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A number in [0, 1).
    private static func unit() -> Double {
        let bits = state.withLock { state -> UInt64 in
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
        return Double(bits >> 11) * 0x1.0p-53
    }
}
