import AccountStoreCore
import BlueskyTesting
import Crypto
import Foundation
import PostgresStore
import Synchronization
import Testing

/// What several hosts on one PostgreSQL database rely on: leases, fencing, tenants, NOTIFY,
/// durable commits and coming back after the database did.
@Suite("The shared PostgreSQL store between hosts")
struct SharedStoreTests {
    /// Two hosts of one tenant on the shared test database, and one account host A added.
    private func withTwoHosts(leaseDuration: TimeInterval = 60,
                              _ body: (_ a: PostgresAccountStore, _ b: PostgresAccountStore, _ account: AccountRecord)
        async throws -> Void) async throws {
        try await SharedTestDatabase.withTwoHosts(leaseDuration: leaseDuration) { a, b in
            let account = Fixtures.record()
            try await a.insert(account, secrets: Fixtures.secrets())
            try await body(a, b, account)
        }
    }

    @Test("one lease at a time, by the database's clock: the other host is told who holds it and until when, and takes over once it ran out")
    func leases() async throws {
        try await withTwoHosts(leaseDuration: 2) { (a, b, record) async throws in
            let now = Date()
            #expect(try await a.claimRefresh(id: record.id, expecting: 1, at: now) == .granted(interruptedAt: nil))
            // A claim made with a clock far ahead changes nothing: the lease is the database's.
            let held = try await b.claimRefresh(id: record.id, expecting: 1, at: now.addingTimeInterval(3600))
            guard case .held(let holder, let until) = held else { Issue.record("expected held, got \(held)"); return }
            #expect(holder == a.leaseOwner && holder.hasPrefix("host-a/") && holder != "host-a/\(getpid())")
            #expect(abs(until.timeIntervalSince(now.addingTimeInterval(2))) < 1)
            #expect(try await a.refreshLease(id: record.id)?.owner == a.leaseOwner)
            // Host A dies holding it: once the lease has run out, B takes the account over, and
            // learns that a refresh was left unfinished (its token may be spent).
            try await Task.sleep(for: .seconds(until.timeIntervalSinceNow + 0.2))
            #expect(try await b.claimRefresh(id: record.id, expecting: 1, at: Date()) == .granted(interruptedAt: now))
            #expect(try await b.refreshLease(id: record.id)?.owner == b.leaseOwner)
        }
    }

    @Test("rotated tokens are saved only over the version they came from; the slower host adopts the newer ones")
    func fencing() async throws {
        try await withTwoHosts { (a, b, record) async throws in
            let now = Date()
            #expect(try await a.claimRefresh(id: record.id, expecting: 1, at: now) == .granted(interruptedAt: nil))
            let rotated = Fixtures.secrets()
            #expect(try await a.saveRefreshedSession(id: record.id, secrets: rotated, accessExpiresAt: nil, refreshExpiresAt: nil,
                                               at: now, replacing: 1) == 2)
            #expect(try await b.claimRefresh(id: record.id, expecting: 1, at: now) == .superseded(version: 2))
            await #expect(throws: StoreError.tokensSuperseded(record.id)) {
                try await b.saveRefreshedSession(id: record.id, secrets: Fixtures.secrets(), accessExpiresAt: nil,
                                           refreshExpiresAt: nil, at: now, replacing: 1)
            }
            #expect(try await b.secrets(for: record.id) == rotated)
        }
    }

    @Test("a host whose lease ran out records its refresh's outcome without clearing the lease another host took since")
    func outcomeKeepsOthersLease() async throws {
        // A 6-s lease: B's must outlast its claim, A's write and A's claim on two busy cores
        // (with 2 s a loaded run saw it run out first, and A granted).
        try await withTwoHosts(leaseDuration: 6) { (a, b, record) async throws in
            let now = Date()
            #expect(try await a.claimRefresh(id: record.id, expecting: 1, at: now) == .granted(interruptedAt: nil))
            try await Task.sleep(for: .seconds(6.2))
            let later = Date()
            #expect(try await b.claimRefresh(id: record.id, expecting: 1, at: later) == .granted(interruptedAt: now))
            try await a.markState(id: record.id, state: .retrying, reason: "timed out", at: later, lease: .release, ifVersion: 1)
            #expect(try await a.refreshLease(id: record.id)?.owner == b.leaseOwner, "host B still holds the account")
            let held = try await a.claimRefresh(id: record.id, expecting: 1, at: later.addingTimeInterval(1))
            guard case .held = held else { Issue.record("expected held, got \(held)"); return }
        }
    }

    @Test("many claims at once from two hosts: exactly one is granted")
    func concurrentClaims() async throws {
        try await withTwoHosts { (a, b, record) async throws in
            let now = Date()
            let outcomes = try await withThrowingTaskGroup(of: (String, RefreshClaim).self) { group in
                for index in 0..<16 {
                    let store = index.isMultiple(of: 2) ? a : b
                    group.addTask {
                        (store.leaseOwner, try await store.claimRefresh(id: record.id, expecting: 1, at: now))
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            let winners = Set(outcomes.compactMap { host, claim in if case .granted = claim { host } else { nil } })
            #expect(winners.count == 1, "one host holds the lease; a host's repeated claim of its own lease is its own")
            #expect(try await a.refreshLease(id: record.id)?.owner == winners.first)
        }
    }

    @Test("two hosts changing the default at once, and adding accounts as the default: one default, no error")
    func concurrentDefaults() async throws {
        try await withTwoHosts { (a, b, first) async throws in
            let others = (0..<6).map { _ in Fixtures.record() }
            try await a.insert(contentsOf: others.map { ($0, Fixtures.secrets()) })
            let ids = [first.id] + others.map(\.id)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for round in 0..<24 {
                    let store = round.isMultiple(of: 2) ? a : b
                    let id = ids[round % ids.count]
                    group.addTask {
                        if round.isMultiple(of: 5) {
                            try await store.insert(Fixtures.record(isDefault: true), secrets: Fixtures.secrets())
                        } else {
                            try await store.setDefault(id: id)
                        }
                    }
                }
                try await group.waitForAll()
            }
            #expect(try await a.allAccounts().filter(\.isDefault).count == 1)
            #expect(a.health.problem == nil && b.health.problem == nil, "no outage was reported")
        }
    }

    @Test("tenants see only their own accounts; the same DID may be in two tenants")
    func tenants() async throws {
        let key = SymmetricKey(size: .bits256)
        let alice = try await SharedTestDatabase.openStore(tenant: "alice-\(UUID().uuidString.prefix(6))", key: key)
        let bob = try await SharedTestDatabase.openStore(tenant: "bob-\(UUID().uuidString.prefix(6))", key: key)
        let record = Fixtures.record(did: "did:plc:shared", isDefault: true)
        try await alice.insert(record, secrets: Fixtures.secrets())
        #expect(try await bob.account(id: record.id) == nil)
        #expect(try await bob.allAccounts().isEmpty)
        #expect(try await bob.count() == 0)
        await #expect(throws: StoreError.unknownAccount(record.id)) { try await bob.delete(id: record.id) }
        await #expect(throws: StoreError.self) { try await bob.secrets(for: record.id) }
        try await bob.insert(Fixtures.record(did: "did:plc:shared", isDefault: true), secrets: Fixtures.secrets())
        #expect(try await alice.account(id: record.id)?.isDefault == true, "each tenant has its own default")
        await alice.close()
        await bob.close()
    }

    @Test("a change on one host reaches the other through NOTIFY; a host does not hear its own", .timeLimit(.minutes(1)))
    func notifications() async throws {
        try await withTwoHosts { (a, b, _) async throws in
            let heardByA = Mutex<[StoreChange]>([])
            let (stream, continuation) = AsyncStream.makeStream(of: StoreChange.self)
            await a.observeChanges { change in heardByA.withLock { $0.append(change) } }
            await b.observeChanges { continuation.yield($0) }
            let record = Fixtures.record()
            try await a.insert(record, secrets: Fixtures.secrets())
            try await a.markState(id: record.id, state: .needsLogin, reason: "revoked", at: Date(), lease: .release)
            var heard: [StoreChange] = []
            for await change in stream {
                heard.append(change)
                if heard.count == 2 { break }
            }
            #expect(heard == [.account(record.id), .account(record.id)])
            #expect(try await b.account(id: record.id)?.state == .needsLogin)
            #expect(heardByA.withLock { $0.isEmpty })
        }
    }

    @Test("commits wait for the disk: synchronous_commit is on whatever the server's default")
    func durableCommits() async throws {
        let server = try await SharedTestDatabase.server
        _ = try server.psql("ALTER DATABASE \(SharedTestDatabase.database) SET synchronous_commit = off", database: "postgres")
        defer { _ = try? server.psql("ALTER DATABASE \(SharedTestDatabase.database) RESET synchronous_commit", database: "postgres") }
        let store = try await SharedTestDatabase.openStore(tenant: "durable", key: SymmetricKey(size: .bits256))
        #expect(try await store.synchronousCommit() == "on")
        await store.close()
    }

    @Test("""
        the database going away: calls fail at once with the reason and the backoff, the outage shows; \
        once it is back the store works again and the listener asks for everything to be read again
        """, .timeLimit(.minutes(2)))
    func databaseOutage() async throws {
        let server = try await offThePool { try PostgresServer.start() }
        defer { server.destroy() }
        let (url, password) = try SharedStoreHosts.createDatabase("outage", on: server)
        let settings = try PostgresStoreSettings(url: url, password: password, tenant: "outage")
        let store = try await PostgresAccountStore(settings: settings, key: SymmetricKey(size: .bits256), hostName: "h",
                                                   logger: Fixtures.logger)
        let (changes, continuation) = AsyncStream.makeStream(of: StoreChange.self)
        await store.observeChanges { continuation.yield($0) }
        let record = Fixtures.record()
        try await store.insert(record, secrets: Fixtures.secrets())

        try await offThePool { try server.stop(mode: .fast) }
        await #expect {
            try await store.markState(id: record.id, state: .retrying, reason: "x", at: Date(), lease: .keep)
        } throws: { error in
            if case StoreError.unreachable = error { return true }
            return false
        }
        #expect(store.health.problem?.hasPrefix("store unavailable: ") == true)
        // While the pool waits before trying again, a call is turned away without a try.
        await #expect {
            try await store.account(id: record.id)
        } throws: { error in
            "\(error)".contains("trying again in")
        }

        try await offThePool { try server.start() }
        let written = await eventually(timeout: .seconds(40)) {
            (try? await store.markState(id: record.id, state: .active, reason: nil, at: Date(), lease: .keep)) != nil
        }
        #expect(written, "the store reconnects by itself")
        #expect(store.health.outage == nil)
        var heard = changes.makeAsyncIterator()
        #expect(await heard.next() == .everything, "the listener came back and asks for a full read")
        await store.close()
    }
}
