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
