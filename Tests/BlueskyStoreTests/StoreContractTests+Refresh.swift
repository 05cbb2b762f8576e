@_spi(Testing) import BlueskyStore
import Crypto
import Foundation
import Testing

@Suite("The write-ahead refresh mark, store outages and the key check")
struct RefreshMarkTests {
    @Test("only refreshes write the mark: a metadata update from a stale record neither sets nor clears it")
    func markIsItsOwnState() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let store = try Fixtures.openStore(in: directory.url, key: SymmetricKey(size: .bits256))
        var record = Fixtures.record()
        try store.insert(record, secrets: Fixtures.secrets())
        let started = Date(timeIntervalSinceReferenceDate: 800_000_000)
        try store.markRefreshStarted(id: record.id, at: started)

        record.handle = "renamed.test"  // a stale in-memory record: no mark in it
        try store.update(record)
        #expect(try store.account(id: record.id)?.refreshStartedAt == started, "a metadata write leaves the mark alone")

        record.refreshStartedAt = Date()
        try store.endRefresh(id: record.id, state: .retrying, reason: "HTTP 503", at: Date())
        let ended = try #require(try store.account(id: record.id))
        #expect(ended.refreshStartedAt == nil && ended.state == .retrying && ended.stateReason == "HTTP 503")
        try store.update(record)
        #expect(try store.account(id: record.id)?.refreshStartedAt == nil, "nor sets it")

        try store.markRefreshStarted(id: record.id, at: started)
        try store.saveRefreshedSession(id: record.id, secrets: Fixtures.secrets(), accessExpiresAt: nil,
                                       refreshExpiresAt: nil, at: Date())
        #expect(try store.account(id: record.id)?.refreshStartedAt == nil, "a stored outcome clears it")
    }

    @Test("failing writes start one outage, with its first reason and a count; a successful write ends it")
    func outageEpisodes() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let store = try Fixtures.openStore(in: directory.url, key: SymmetricKey(size: .bits256))
        let record = Fixtures.record()
        try store.insert(record, secrets: Fixtures.secrets())
        #expect(store.health.outage == nil)

        store.health.injectWriteFailures("database or disk is full")
        for _ in 0..<3 { #expect(throws: StoreError.self) { try store.markRefreshStarted(id: record.id, at: Date()) } }
        let outage = try #require(store.health.outage)
        #expect(outage.reason == "database or disk is full" && outage.failedWrites == 3)
        #expect(store.health.problem == "store unavailable: database or disk is full")
        #expect(try store.account(id: record.id)?.refreshStartedAt == nil, "nothing was written")

        store.health.injectWriteFailures(nil)
        try store.markRefreshStarted(id: record.id, at: Date())
        #expect(store.health.outage == nil)
        // A refusal that says nothing about the disk is no outage.
        #expect(throws: StoreError.self) { try store.insert(record, secrets: Fixtures.secrets()) }
        #expect(store.health.outage == nil)
    }

    @Test("verifyKey: the right key passes; another key is found before any refresh")
    func keyCheck() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let key = SymmetricKey(size: .bits256)
        let store = try Fixtures.openStore(in: directory.url, key: key)
        try store.verifyKey()  // an empty store opens with any key
        try store.insert(Fixtures.record(), secrets: Fixtures.secrets())
        try store.verifyKey()
        try store.close()
        let reopened = try Fixtures.openStore(in: directory.url, key: SymmetricKey(size: .bits256))
        #expect {
            try reopened.verifyKey()
        } throws: { error in
            if case StoreError.secretDoesNotOpen = error { return true }
            return false
        }
    }
}
