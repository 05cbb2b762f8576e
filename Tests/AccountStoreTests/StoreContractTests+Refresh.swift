@_spi(Testing) import AccountStoreCore
import Crypto
import Foundation
import Testing

extension StoreContractTests {
    @Test("only refreshes write the mark: a metadata update from a stale record neither sets nor clears it",
          arguments: StoreBackend.allCases)
    func markIsItsOwnState(_ backend: StoreBackend) async throws {
        try await backend.withStore { store in
            var record = Fixtures.record()
            try await store.insert(record, secrets: Fixtures.secrets())
            let started = Date(timeIntervalSinceReferenceDate: 800_000_000)
            #expect(try await store.markRefreshStarted(id: record.id, at: started) == .granted(interruptedAt: nil))

            record.handle = "renamed.test"  // a stale in-memory record: no mark in it
            try await store.saveIdentity(record)
            #expect(try await store.account(id: record.id)?.refreshStartedAt == started, "an identity write leaves the mark alone")

            record.refreshStartedAt = Date()
            try await store.endRefresh(id: record.id, state: .retrying, reason: "HTTP 503", at: Date())
            let ended = try #require(try await store.account(id: record.id))
            #expect(ended.refreshStartedAt == nil && ended.state == .retrying && ended.stateReason == "HTTP 503")
            try await store.saveIdentity(record)
            #expect(try await store.account(id: record.id)?.refreshStartedAt == nil, "nor sets it")

            try await store.markRefreshStarted(id: record.id, at: started)
            try await store.saveRefreshedSession(id: record.id, secrets: Fixtures.secrets(), accessExpiresAt: nil,
                                           refreshExpiresAt: nil, at: Date())
            #expect(try await store.account(id: record.id)?.refreshStartedAt == nil, "a stored outcome clears it")
        }
    }

    @Test("a refresh: lease and mark, then one commit with the new session and the next version",
          arguments: StoreBackend.allCases)
    func refreshLifecycle(_ backend: StoreBackend) async throws {
        try await backend.withStore { store in
            let record = Fixtures.record()
            try await store.insert(record, secrets: Fixtures.secrets())

            let started = Date()
            #expect(try await store.claimRefresh(id: record.id, expecting: 1, at: started) == .granted(interruptedAt: nil))
            #expect(try await store.account(id: record.id)?.refreshStartedAt == started)

            try await store.markState(id: record.id, state: .retrying, reason: "connection reset", at: started)
            let retrying = try #require(try await store.account(id: record.id))
            #expect(retrying.state == .retrying && retrying.stateReason == "connection reset")
            #expect(retrying.refreshStartedAt == started, "a transient failure leaves the token's fate unknown")
            #expect(try await store.claimRefresh(id: record.id, expecting: 1, at: started.addingTimeInterval(5))
                        == .granted(interruptedAt: started), "the next claim learns of the unfinished refresh")

            let rotated = Fixtures.secrets()
            let finished = started.addingTimeInterval(6)
            let accessExpiry = finished.addingTimeInterval(7200)
            let refreshExpiry = finished.addingTimeInterval(90 * 86400)
            #expect(try await store.saveRefreshedSession(id: record.id, secrets: rotated, accessExpiresAt: accessExpiry,
                                                   refreshExpiresAt: refreshExpiry, at: finished, replacing: 1) == 2)
            let refreshed = try #require(try await store.account(id: record.id))
            #expect(refreshed.state == .active && refreshed.stateReason == nil && refreshed.refreshStartedAt == nil)
            #expect(refreshed.lastRefreshAt == finished && refreshed.accessExpiresAt == accessExpiry
                        && refreshed.refreshExpiresAt == refreshExpiry && refreshed.secretsVersion == 2)
            #expect(try await store.secrets(for: record.id) == rotated)

            #expect(try await store.claimRefresh(id: record.id, expecting: 1, at: finished) == .superseded(version: 2),
                    "a claim from the old version is told that newer tokens exist")
            await #expect(throws: StoreError.tokensSuperseded(record.id)) {
                try await store.saveRefreshedSession(id: record.id, secrets: Fixtures.secrets(), accessExpiresAt: nil,
                                               refreshExpiresAt: nil, at: finished, replacing: 1)
            }
            #expect(try await store.secrets(for: record.id) == rotated, "a save over an old version changes nothing")

            #expect(try await store.claimRefresh(id: record.id, expecting: 2, at: finished) == .granted(interruptedAt: nil))
            try await store.markState(id: record.id, state: .needsLogin, reason: "ExpiredToken", at: finished, lease: .release)
            let refused = try #require(try await store.account(id: record.id))
            #expect(refused.state == .needsLogin && refused.stateReason == "ExpiredToken" && refused.refreshStartedAt == nil)

            let missing = UUID()
            await #expect(throws: StoreError.unknownAccount(missing)) {
                try await store.saveRefreshedSession(id: missing, secrets: rotated, accessExpiresAt: nil, refreshExpiresAt: nil,
                                               at: finished, replacing: 1)
            }
            await #expect(throws: StoreError.unknownAccount(missing)) { try await store.claimRefresh(id: missing, expecting: 1, at: finished) }
        }
    }

    @Test("failing writes start one outage, with its first reason and a count; a successful write ends it",
          arguments: StoreBackend.allCases)
    func outageEpisodes(_ backend: StoreBackend) async throws {
        try await backend.withStore { store in
            let record = Fixtures.record()
            try await store.insert(record, secrets: Fixtures.secrets())
            #expect(store.health.outage == nil)

            store.health.injectWriteFailures("database or disk is full")
            for _ in 0..<3 { await #expect(throws: StoreError.self) { try await store.markRefreshStarted(id: record.id, at: Date()) } }
            let outage = try #require(store.health.outage)
            #expect(outage.reason == "database or disk is full" && outage.failedWrites == 3)
            #expect(store.health.problem == "store unavailable: database or disk is full")
            #expect(try await store.account(id: record.id)?.refreshStartedAt == nil, "nothing was written")

            store.health.injectWriteFailures(nil)
            try await store.markRefreshStarted(id: record.id, at: Date())
            #expect(store.health.outage == nil)
            // A refusal that says nothing about the disk is no outage.
            await #expect(throws: StoreError.self) { try await store.insert(record, secrets: Fixtures.secrets()) }
            #expect(store.health.outage == nil)
        }
    }

    @Test("verifyKey: the right key passes; another key is found before any refresh", arguments: StoreBackend.allCases)
    func keyCheck(_ backend: StoreBackend) async throws {
        let key = SymmetricKey(size: .bits256)
        guard backend.sealsSecrets else { return }
        let opened = try await backend.open(key: key)
        try await opened.store.verifyKey()  // an empty store opens with any key
        try await opened.store.insert(Fixtures.record(), secrets: Fixtures.secrets())
        try await opened.store.verifyKey()
        await opened.store.close()
        let reopened = try await backend.open(key: SymmetricKey(size: .bits256), reuse: opened)
        await #expect {
            try await reopened.store.verifyKey()
        } throws: { error in
            if case StoreError.secretDoesNotOpen = error { return true }
            return false
        }
        await reopened.close()
        opened.directory?.remove()
    }

    @Test("a refresh's outcome applies only to the tokens it was sent with: newer ones keep their state",
          arguments: StoreBackend.allCases)
    func outcomeOfReplacedTokens(_ backend: StoreBackend) async throws {
        try await backend.withStore { store in
            let record = Fixtures.record()
            try await store.insert(record, secrets: Fixtures.secrets())
            #expect(try await store.claimRefresh(id: record.id, expecting: 1, at: Date()) == .granted(interruptedAt: nil))
            let version = try await store.saveRefreshedSession(id: record.id, secrets: Fixtures.secrets(), accessExpiresAt: nil,
                                                         refreshExpiresAt: nil, at: Date(), replacing: 1)
            await #expect(throws: StoreError.tokensSuperseded(record.id)) {
                try await store.markState(id: record.id, state: .needsLogin, reason: "Refresh token replayed", at: Date(),
                                    lease: .release, ifVersion: 1)
            }
            #expect(try await store.account(id: record.id)?.state == .active, "the newer tokens stay usable")
            try await store.markState(id: record.id, state: .retrying, reason: "HTTP 503", at: Date(), lease: .release,
                                ifVersion: version)
            #expect(try await store.account(id: record.id)?.state == .retrying)
        }
    }
}
