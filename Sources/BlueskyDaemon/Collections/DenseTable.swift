/// A map from `Key` to `Value` for the tables that hold one entry per registered account.
///
/// The entries sit in two dense arrays, and an open-addressed index of 32-bit positions (linear
/// probing, at most half full) finds them: an entry costs its key, its value and 8 to 16 bytes of
/// index. A `Dictionary` keeps key and value in every bucket, and its buckets, at most 3/4 full
/// and a power of two, are 1.3 to 2.7 times the entries: at 1,000,000 accounts a
/// `[UUID: AccountSession]` takes 50 MB, this 32.
///
/// Removing an entry moves the last one into its place, so positions are not stable and the
/// order of `keys` and `values` is the order of insertion only until the first removal.
struct DenseTable<Key: Hashable, Value> {
    private(set) var keys: [Key] = []
    private(set) var values: [Value] = []
    /// Per bucket, the position + 1 of the entry whose probe sequence passes through it; 0: empty.
    /// A power of two long (or empty), never more than half full.
    private var buckets: [UInt32] = []

    init() {}

    var count: Int { keys.count }

    /// Makes room for `minimum` entries without growing step by step (a start loading them all).
    /// Called again with a little more each time it still grows geometrically (an array's own
    /// `reserveCapacity` would copy every time).
    mutating func reserveCapacity(_ minimum: Int) {
        if minimum > keys.capacity {
            keys.reserveCapacity(max(minimum, keys.capacity * 2))
            values.reserveCapacity(max(minimum, values.capacity * 2))
        }
        let wanted = Self.bucketCount(for: minimum)
        if wanted > buckets.count { rehash(bucketCount: wanted) }
    }

    subscript(key: Key) -> Value? {
        get { find(key).position.map { values[$0] } }
        set {
            if let newValue { updateValue(newValue, forKey: key) } else { removeValue(forKey: key) }
        }
    }

    /// Sets the value of `key`; the value it replaces, or nil when the key is new.
    @discardableResult
    mutating func updateValue(_ value: Value, forKey key: Key) -> Value? {
        let found = find(key)
        if let position = found.position {
            let replaced = values[position]
            values[position] = value
            return replaced
        }
        precondition(keys.count < Int(UInt32.max - 1), "DenseTable holds fewer than 2^32 - 1 entries")
        if (keys.count + 1) * 2 > buckets.count {
            rehash(bucketCount: Self.bucketCount(for: keys.count + 1))
            buckets[find(key).bucket] = UInt32(keys.count + 1)
        } else {
            buckets[found.bucket] = UInt32(keys.count + 1)
        }
        keys.append(key)
        values.append(value)
        return nil
    }

    /// Removes `key`; its value, or nil when it had none. The last entry takes its position.
    @discardableResult
    mutating func removeValue(forKey key: Key) -> Value? {
        let found = find(key)
        guard let position = found.position else { return nil }
        let removed = values[position]
        vacate(found.bucket)
        let last = keys.count - 1
        if position != last {
            // The last entry moves into the freed position; its bucket follows it.
            buckets[find(keys[last]).bucket] = UInt32(position + 1)
            keys.swapAt(position, last)
            values.swapAt(position, last)
        }
        keys.removeLast()
        values.removeLast()
        return removed
    }

    // MARK: - The index

    /// Buckets for `count` entries: a power of two, at least twice the count.
    private static func bucketCount(for count: Int) -> Int {
        var buckets = 8
        while buckets < count * 2 { buckets <<= 1 }
        return buckets
    }

    /// The bucket that holds `key` (and its position), or the empty bucket where it would go.
    private func find(_ key: Key) -> (bucket: Int, position: Int?) {
        guard !buckets.isEmpty else { return (0, nil) }
        let mask = buckets.count - 1
        var bucket = key.hashValue & mask
        while true {
            let entry = buckets[bucket]
            if entry == 0 { return (bucket, nil) }
            if keys[Int(entry - 1)] == key { return (bucket, Int(entry - 1)) }
            bucket = (bucket + 1) & mask
        }
    }

    /// Empties `bucket` and moves back the entries after it that probed past it (backward-shift
    /// deletion), so that no lookup stops short at the hole and no tombstone is left.
    private mutating func vacate(_ bucket: Int) {
        let mask = buckets.count - 1
        var hole = bucket
        var next = (hole + 1) & mask
        while buckets[next] != 0 {
            let home = keys[Int(buckets[next] - 1)].hashValue & mask
            // The entry at `next` may fill the hole when the hole lies on its probe sequence,
            // between its home bucket and where it is now.
            if (next - home) & mask >= (next - hole) & mask {
                buckets[hole] = buckets[next]
                hole = next
            }
            next = (next + 1) & mask
        }
        buckets[hole] = 0
    }

    private mutating func rehash(bucketCount: Int) {
        buckets = [UInt32](repeating: 0, count: bucketCount)
        let mask = bucketCount - 1
        for (position, key) in keys.enumerated() {
            var bucket = key.hashValue & mask
            while buckets[bucket] != 0 { bucket = (bucket + 1) & mask }
            buckets[bucket] = UInt32(position + 1)
        }
    }
}

extension DenseTable: Sendable where Key: Sendable, Value: Sendable {}
