import PropertyBased
import Testing
@testable import BlueskyDaemon

/// The registry's and the scheduler's tables: a `DenseTable` answers as a `Dictionary` would,
/// whatever the order of insertions, replacements and removals.
@Suite("DenseTable: the per-account tables answer as a dictionary would")
struct DenseTableTests {
    /// A key whose hashes fall into three buckets: long probe sequences that wrap around the
    /// end of the index, and removals that must move entries back over the hole.
    struct Clumped: Hashable {
        let number: Int
        func hash(into hasher: inout Hasher) { hasher.combine(number % 3) }
    }

    /// Applies `operations` (each an operation and a key, packed: insert, replace, remove) to
    /// a table and a dictionary, and checks after every step that they hold the same entries.
    static func check<Key: Hashable>(_ operations: [Int], key: (Int) -> Key) {
        var table = DenseTable<Key, Int>()
        var expected: [Key: Int] = [:]
        for (step, packed) in operations.enumerated() {
            let k = key(packed / 3)
            switch packed % 3 {
            case 0, 1:
                #expect(table.updateValue(step, forKey: k) == expected.updateValue(step, forKey: k))
            default:
                #expect(table.removeValue(forKey: k) == expected.removeValue(forKey: k))
            }
            #expect(table.count == expected.count)
            #expect(table.keys.count == table.values.count)
            for (k, value) in zip(table.keys, table.values) { #expect(expected[k] == value) }
            for (k, value) in expected { #expect(table[k] == value) }
        }
    }

    @Test("random insertions, replacements and removals over a few keys agree with a dictionary")
    func agreesWithDictionary() async {
        await propertyCheck(count: 300, input: Gen.int(in: 0...(3 * 60 - 1)).array(of: 0...300)) { operations in
            Self.check(operations) { $0 }
        }
    }

    @Test("keys that all hash alike: probing wraps around and removal closes every hole")
    func clumpedKeysAgreeWithDictionary() async {
        await propertyCheck(count: 300, input: Gen.int(in: 0...(3 * 30 - 1)).array(of: 0...200)) { operations in
            Self.check(operations) { Clumped(number: $0) }
        }
    }

    @Test("200,000 entries after one reservation: each found, then every other removed")
    func manyEntries() {
        var table = DenseTable<Int, Int>()
        table.reserveCapacity(200_000)
        for n in 0..<200_000 { table[n] = n * 2 }
        #expect(table.count == 200_000)
        #expect((0..<200_000).allSatisfy { table[$0] == $0 * 2 })
        for n in stride(from: 0, to: 200_000, by: 2) { table[n] = nil }
        #expect(table.count == 100_000)
        #expect((0..<200_000).allSatisfy { table[$0] == ($0 % 2 == 0 ? nil : $0 * 2) })
    }
}
