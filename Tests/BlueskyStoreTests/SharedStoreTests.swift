import BlueskyStore
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
    private func withTwoHosts(_ body: (_ a: PostgresAccountStore, _ b: PostgresAccountStore, _ account: AccountRecord)
        async throws -> Void) async throws {
        try await SharedTestDatabase.withTwoHosts { a, b in
            let account = Fixtures.record()
            try a.insert(account, secrets: Fixtures.secrets())
            try await body(a, b, account)
        }
    }

    @Test("one lease at a time: the other host is told who holds it and until when, and takes over once it ran out")
    func leases() async throws {
        try await withTwoHosts { (a, b, record) async throws in
            let now = Date()
            #expect(try a.claimRefresh(id: record.id, expecting: 1, at: now) == .granted(interruptedAt: nil))
            let held = try b.claimRefresh(id: record.id, expecting: 1, at: now.addingTimeInterval(1))
            guard case .held(let holder, let until) = held else { Issue.record("expected held, got \(held)"); return }
            #expect(holder == a.leaseOwner && holder.hasPrefix("host-a/"))
            #expect(abs(until.timeIntervalSince(now.addingTimeInterval(60))) < 0.001)
            #expect(try a.refreshLease(id: record.id)?.owner == a.leaseOwner)
            // Host A dies holding it: once the lease has run out, B takes the account over, and
            // learns that a refresh was left unfinished (its token may be spent).
            #expect(try b.claimRefresh(id: record.id, expecting: 1, at: now.addingTimeInterval(61))
                        == .granted(interruptedAt: now))
            #expect(try b.refreshLease(id: record.id)?.owner == b.leaseOwner)
        }
    }

    @Test("rotated tokens are saved only over the version they came from; the slower host adopts the newer ones")
    func fencing() async throws {
        try await withTwoHosts { (a, b, record) async throws in
            let now = Date()
            #expect(try a.claimRefresh(id: record.id, expecting: 1, at: now) == .granted(interruptedAt: nil))
            let rotated = Fixtures.secrets()
            #expect(try a.saveRefreshedSession(id: record.id, secrets: rotated, accessExpiresAt: nil, refreshExpiresAt: nil,
                                               at: now, replacing: 1) == 2)
            #expect(try b.claimRefresh(id: record.id, expecting: 1, at: now) == .superseded(version: 2))
            #expect(throws: StoreError.tokensSuperseded(record.id)) {
                try b.saveRefreshedSession(id: record.id, secrets: Fixtures.secrets(), accessExpiresAt: nil,
                                           refreshExpiresAt: nil, at: now, replacing: 1)
            }
            #expect(try b.secrets(for: record.id) == rotated)
        }
    }

    @Test("a host whose lease ran out records its refresh's outcome without clearing the lease another host took since")
    func outcomeKeepsOthersLease() async throws {
        try await withTwoHosts { (a, b, record) async throws in
            let now = Date()
            #expect(try a.claimRefresh(id: record.id, expecting: 1, at: now) == .granted(interruptedAt: nil))
            let later = now.addingTimeInterval(61)
            #expect(try b.claimRefresh(id: record.id, expecting: 1, at: later) == .granted(interruptedAt: now))
            try a.markState(id: record.id, state: .retrying, reason: "timed out", at: later, endsRefresh: true, ifVersion: 1)
            #expect(try a.refreshLease(id: record.id)?.owner == b.leaseOwner, "host B still holds the account")
            let held = try a.claimRefresh(id: record.id, expecting: 1, at: later.addingTimeInterval(1))
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
                        try await offThePool { (store.leaseOwner, try store.claimRefresh(id: record.id, expecting: 1, at: now)) }
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            let winners = Set(outcomes.compactMap { host, claim in if case .granted = claim { host } else { nil } })
            #expect(winners.count == 1, "one host holds the lease; a host's repeated claim of its own lease is its own")
            #expect(try a.refreshLease(id: record.id)?.owner == winners.first)
        }
    }

    @Test("two hosts changing the default at once, and adding accounts as the default: one default, no error")
    func concurrentDefaults() async throws {
        try await withTwoHosts { (a, b, first) async throws in
            let others = (0..<6).map { _ in Fixtures.record() }
            try a.insert(contentsOf: others.map { ($0, Fixtures.secrets()) })
            let ids = [first.id] + others.map(\.id)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for round in 0..<24 {
                    let store = round.isMultiple(of: 2) ? a : b
                    let id = ids[round % ids.count]
                    group.addTask {
                        try await offThePool {
                            if round.isMultiple(of: 5) {
                                try store.insert(Fixtures.record(isDefault: true), secrets: Fixtures.secrets())
                            } else {
                                try store.setDefault(id: id)
                            }
                        }
                    }
                }
                try await group.waitForAll()
            }
            #expect(try a.allAccounts().filter(\.isDefault).count == 1)
            #expect(a.health.problem == nil && b.health.problem == nil, "no outage was reported")
        }
    }

    @Test("tenants see only their own accounts; the same DID may be in two tenants")
    func tenants() throws {
        let key = SymmetricKey(size: .bits256)
        let alice = try SharedTestDatabase.openStore(tenant: "alice-\(UUID().uuidString.prefix(6))", key: key)
        let bob = try SharedTestDatabase.openStore(tenant: "bob-\(UUID().uuidString.prefix(6))", key: key)
        defer { try? alice.close(); try? bob.close() }
        let record = Fixtures.record(did: "did:plc:shared", isDefault: true)
        try alice.insert(record, secrets: Fixtures.secrets())
        #expect(try bob.account(id: record.id) == nil && bob.allAccounts().isEmpty && bob.count() == 0)
        #expect(throws: StoreError.unknownAccount(record.id)) { try bob.delete(id: record.id) }
        #expect(throws: StoreError.self) { try bob.secrets(for: record.id) }
        try bob.insert(Fixtures.record(did: "did:plc:shared", isDefault: true), secrets: Fixtures.secrets())
        #expect(try alice.account(id: record.id)?.isDefault == true, "each tenant has its own default")
    }

    @Test("a change on one host reaches the other through NOTIFY; a host does not hear its own", .timeLimit(.minutes(1)))
    func notifications() async throws {
        try await withTwoHosts { (a, b, _) async throws in
            let heardByA = Mutex<[StoreChange]>([])
            let (stream, continuation) = AsyncStream.makeStream(of: StoreChange.self)
            a.observeChanges { change in heardByA.withLock { $0.append(change) } }
            b.observeChanges { continuation.yield($0) }
            let record = Fixtures.record()
            try a.insert(record, secrets: Fixtures.secrets())
            try a.markState(id: record.id, state: .needsLogin, reason: "revoked", at: Date(), endsRefresh: true)
            var heard: [StoreChange] = []
            for await change in stream {
                heard.append(change)
                if heard.count == 2 { break }
            }
            #expect(heard == [.account(record.id), .account(record.id)])
            #expect(try b.account(id: record.id)?.state == .needsLogin)
            #expect(heardByA.withLock { $0.isEmpty })
        }
    }

    @Test("commits wait for the disk: synchronous_commit is on whatever the server's default")
    func durableCommits() throws {
        let server = try SharedTestDatabase.server
        _ = try server.psql("ALTER DATABASE \(SharedTestDatabase.database) SET synchronous_commit = off", database: "postgres")
        defer { _ = try? server.psql("ALTER DATABASE \(SharedTestDatabase.database) RESET synchronous_commit", database: "postgres") }
        let store = try SharedTestDatabase.openStore(tenant: "durable", key: SymmetricKey(size: .bits256))
        defer { try? store.close() }
        #expect(try store.synchronousCommit() == "on")
    }

    @Test("""
        the database going away: calls fail at once with the reason and the backoff, the outage shows; \
        once it is back the store works again and the listener asks for everything to be read again
        """, .timeLimit(.minutes(2)))
    func databaseOutage() async throws {
        let server = try PostgresServer.start()
        defer { server.destroy() }
        let (url, password) = try SharedStoreHosts.createDatabase("outage", on: server)
        let settings = try PostgresStoreSettings(url: url, password: password, tenant: "outage")
        let store = try PostgresAccountStore(settings: settings, key: SymmetricKey(size: .bits256), hostName: "h",
                                             logger: Fixtures.logger)
        defer { try? store.close() }
        let (changes, continuation) = AsyncStream.makeStream(of: StoreChange.self)
        store.observeChanges { continuation.yield($0) }
        let record = Fixtures.record()
        try store.insert(record, secrets: Fixtures.secrets())

        try server.stop(mode: .fast)
        #expect {
            try store.markState(id: record.id, state: .retrying, reason: "x", at: Date(), endsRefresh: false)
        } throws: { error in
            if case StoreError.unreachable = error { return true }
            return false
        }
        #expect(store.health.problem?.hasPrefix("store unavailable: ") == true)
        // While the pool waits before trying again, a call is turned away without a try.
        #expect {
            try store.account(id: record.id)
        } throws: { error in
            "\(error)".contains("trying again in")
        }

        try server.start()
        let written = await eventually(timeout: .seconds(40)) {
            (try? store.markState(id: record.id, state: .active, reason: nil, at: Date(), endsRefresh: false)) != nil
        }
        #expect(written, "the store reconnects by itself")
        #expect(store.health.outage == nil)
        var heard = changes.makeAsyncIterator()
        #expect(await heard.next() == .everything, "the listener came back and asks for a full read")
    }
}
