/// Reads a store's accounts a page at a time, one page ahead.
///
/// A start with 100,000 accounts spends about two thirds of its CPU reading rows (SQLite's pages,
/// decoding, the metadata seal check, all on the store's own threads) and a third making the
/// sessions from them (on the caller's). Read in turn, the two add up; with the next page read
/// while the caller works through this one, they overlap on a machine's two cores. At most two
/// pages are held at once, so memory stays what paging promised.
public enum AccountPages {
    /// Calls `body` with every account of every page `read` gives, starting at `first`: `read`
    /// hands back a page and the key of the page after it (nil at the last). The next page's
    /// read is under way while `body` runs; an error in either ends the walk, after the read
    /// under way has finished (no read is left running past the return).
    public static func forEach<Key: Sendable>(
        from first: Key?,
        _ read: @escaping @Sendable (Key?) async throws -> (page: [AccountRecord], next: Key?),
        _ body: (AccountRecord) async throws -> Void
    ) async throws {
        var reading = Task { try await read(first) }
        while true {
            let (page, next) = try await reading.value
            guard let next else {
                for record in page { try await body(record) }
                return
            }
            reading = Task { try await read(next) }
            do {
                for record in page { try await body(record) }
            } catch {
                _ = try? await reading.value
                throw error
            }
        }
    }
}
