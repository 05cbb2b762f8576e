// Shared by every fuzz target (scripts/fuzz compiles this file into each of them).
import Foundation

/// The fuzzer's input as an array: the parsers under test take `[UInt8]` or a collection.
func fuzzInput(_ start: UnsafeRawPointer, _ count: Int) -> [UInt8] {
    Array(UnsafeRawBufferPointer(start: start, count: count))
}

/// Stops the run when a property does not hold.
///
/// `abort()` rather than `precondition`: libFuzzer treats the signal as a crash, saves the input
/// under the artifact prefix and prints this message above its stack trace, and -O builds keep
/// it (a `precondition` message is dropped in optimised builds).
func require(
    _ condition: @autoclosure () -> Bool, _ message: @autoclosure () -> String,
    file: StaticString = #fileID, line: UInt = #line
) {
    guard !condition() else { return }
    // Messages may quote whole values: a screenful is enough, the input is saved anyway.
    printError("PROPERTY FAILED at \(file):\(line): \(message().prefix(1500))")
    abort()
}

/// Unbuffered, so the line is out before `abort()`.
private func printError(_ line: String) {
    FileHandle.standardError.write(Data((line + "\n").utf8))
}

/// Inputs that hit a known, tolerated disagreement, by name; printed when the run ends so the
/// long runs can report how often each class came up.
nonisolated(unsafe) private var knownFindings: [String: Int] = [:]
nonisolated(unsafe) private var knownFindingsReported = false

/// Counts one input of a known class instead of failing on it (see docs/FUZZING.md).
func noteKnownFinding(_ name: String) {
    if !knownFindingsReported {
        knownFindingsReported = true
        // libFuzzer ends a run with exit(), so an atexit hook sees every input it ran.
        atexit {
            for (name, count) in knownFindings.sorted(by: { $0.key < $1.key }) {
                printError("known finding \(name): \(count) hits")
            }
        }
    }
    knownFindings[name, default: 0] += 1
}

/// A small deterministic generator: the same input must always take the same path, or
/// libFuzzer cannot reproduce or minimise what it found.
struct FuzzRandom {
    private var state: UInt64

    /// Seeded from the input's bytes (FNV-1a), so each input brings its own choices.
    init(seed bytes: [UInt8]) {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes {
            hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3
        }
        state = hash | 1
    }

    /// A number in `range` (xorshift64*).
    mutating func next(in range: ClosedRange<Int>) -> Int {
        state ^= state >> 12
        state ^= state << 25
        state ^= state >> 27
        let value = state &* 0x2545_F491_4F6C_DD1D
        return range.lowerBound + Int(value % UInt64(range.count))
    }
}
