import JSONRPC
import Synchronization

/// Every account's `app.bsky.feed.post` records in one order (newest first), from which
/// timelines are paged deterministically.
final class FeedIndex: Sendable {
    struct Entry: Sendable {
        let rkey: String
        let did: String
        let cid: String
        let value: JSONValue

        var uri: String { "at://\(did)/\(FeedIndex.postCollection)/\(rkey)" }
        var cursor: String { rkey + "::" + did }
        /// Ascending order; the feed is read from the end.
        func precedes(_ other: Entry) -> Bool { (rkey, did) < (other.rkey, other.did) }
    }

    static let postCollection = "app.bsky.feed.post"

    private let entries = Mutex<[Entry]>([])

    func insert(_ entry: Entry) {
        entries.withLock { entries in
            if let last = entries.last, entry.precedes(last) {
                let index = entries.firstIndex { !$0.precedes(entry) } ?? entries.count
                entries.insert(entry, at: index)
            } else {
                entries.append(entry)
            }
        }
    }

    func remove(did: String, rkey: String) {
        entries.withLock { entries in entries.removeAll { $0.did == did && $0.rkey == rkey } }
    }

    /// Up to `limit` entries older than `cursor`, newest first, and the cursor for the next
    /// page (nil at the end).
    func page(limit: Int, cursor: String?) -> (entries: [Entry], cursor: String?) {
        entries.withLock { entries in
            var end = entries.count
            if let cursor {
                let parts = cursor.split(separator: "::", maxSplits: 1)
                let rkey = String(parts.first ?? "")
                let did = parts.count > 1 ? String(parts[1]) : ""
                end = Self.firstIndex(notBefore: (rkey, did), in: entries)
            }
            let selected = Array(entries[..<end].suffix(limit).reversed())
            let more = end > selected.count
            return (selected, more ? selected.last?.cursor : nil)
        }
    }

    private static func firstIndex(notBefore key: (String, String), in entries: [Entry]) -> Int {
        var low = 0
        var high = entries.count
        while low < high {
            let middle = (low + high) / 2
            if (entries[middle].rkey, entries[middle].did) < key { low = middle + 1 } else { high = middle }
        }
        return low
    }
}
