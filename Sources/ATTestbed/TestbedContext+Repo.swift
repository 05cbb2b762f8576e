import JSONRPC
/// Repo writes shared by the XRPC handlers and account seeding: records land in the account's
/// collection and, for posts, in the timeline index.
extension TestbedContext {
    /// Stores a record (its `$type` defaulting to the collection); nil when the key is taken.
    func storeRecord(
        in account: AccountState,
        collection: String,
        rkey: String?,
        record: [String: JSONValue]
    ) -> StoredRecord? {
        var record = record
        if record["$type"] == nil { record["$type"] = .string(collection) }
        let value = JSONValue.object(record)
        let stored = StoredRecord(
            rkey: rkey ?? tids.next(now: clock.now()),
            cid: ContentID.record(value.encoded()),
            value: value
        )
        let inserted = account.data.withLock { $0.collections[collection, default: RecordCollection()].insert(stored) }
        guard inserted else { return nil }
        if collection == FeedIndex.postCollection {
            feed.insert(FeedIndex.Entry(rkey: stored.rkey, did: account.did, cid: stored.cid, value: value))
        }
        return stored
    }

    /// Returns whether there was such a record.
    @discardableResult
    func deleteRecord(in account: AccountState, collection: String, rkey: String) -> Bool {
        let removed = account.data.withLock { $0.collections[collection]?.remove(rkey: rkey) } != nil
        if removed, collection == FeedIndex.postCollection {
            feed.remove(did: account.did, rkey: rkey)
        }
        return removed
    }

    /// A new commit revision, as write responses report it.
    func makeCommit() -> JSONValue {
        let rev = tids.next(now: clock.now())
        return ["cid": .string(ContentID.record(Array(rev.utf8))), "rev": .string(rev)]
    }

    func post(text: String) -> [String: JSONValue] {
        [
            "$type": .string(FeedIndex.postCollection),
            "text": .string(text),
            "createdAt": .string(HTTPDate.iso8601(clock.now())),
        ]
    }
}

enum RecordKey {
    /// atproto record key syntax: 1-512 of `A-Za-z0-9._:~-`, not `.` or `..`.
    static func isValid(_ key: String) -> Bool {
        guard (1...512).contains(key.utf8.count), key != ".", key != ".." else { return false }
        return key.utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"):
                true
            case UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: ":"), UInt8(ascii: "~"), UInt8(ascii: "-"): true
            default: false
            }
        }
    }
}
