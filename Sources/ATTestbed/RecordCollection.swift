import JSONRPC
/// A stored record: its key, content id and JSON value.
struct StoredRecord: Sendable {
    let rkey: String
    let cid: String
    let value: JSONValue
}

/// One collection of a repo, kept sorted by record key so listing pages are cheap.
struct RecordCollection {
    private(set) var keys: [String] = []
    private(set) var records: [String: StoredRecord] = [:]

    var count: Int { keys.count }

    /// Returns false when the key is taken.
    mutating func insert(_ record: StoredRecord) -> Bool {
        guard records[record.rkey] == nil else { return false }
        records[record.rkey] = record
        if let last = keys.last, last > record.rkey {
            keys.insert(record.rkey, at: Self.insertionIndex(of: record.rkey, in: keys))
        } else {
            keys.append(record.rkey)  // TIDs only grow: the usual case
        }
        return true
    }

    mutating func remove(rkey: String) -> StoredRecord? {
        guard let removed = records.removeValue(forKey: rkey) else { return nil }
        keys.remove(at: Self.insertionIndex(of: rkey, in: keys))
        return removed
    }

    /// Newest (highest key) first unless `reverse`; the cursor is the last key returned and is
    /// only given when more records follow.
    func page(limit: Int, cursor: String?, reverse: Bool) -> (records: [StoredRecord], cursor: String?) {
        var selected: [String]
        if reverse {
            let start = cursor.map { Self.insertionIndex(of: $0, in: keys, after: true) } ?? 0
            selected = Array(keys[start...].prefix(limit))
            let more = start + selected.count < keys.count
            return (selected.map { records[$0]! }, more ? selected.last : nil)
        }
        let end = cursor.map { Self.insertionIndex(of: $0, in: keys) } ?? keys.count
        selected = Array(keys[..<end].suffix(limit).reversed())
        let more = end - selected.count > 0
        return (selected.map { records[$0]! }, more ? selected.last : nil)
    }

    /// The first index whose key is >= `key` (or > `key` when `after`).
    static func insertionIndex(of key: String, in keys: [String], after: Bool = false) -> Int {
        var low = 0
        var high = keys.count
        while low < high {
            let middle = (low + high) / 2
            if keys[middle] < key || (after && keys[middle] == key) {
                low = middle + 1
            } else {
                high = middle
            }
        }
        return low
    }
}
