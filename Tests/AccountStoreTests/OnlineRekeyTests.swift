import AccountStoreCore
import BlueskyTesting
import Crypto
import Foundation
import PostgresStore
import Synchronization
import Testing

/// A rekey while a PostgreSQL tenant's hosts run (docs/design/rekey.md), at the store: hosts
/// holding both keys open rows under either, the tenant's writing key decides what every host
/// seals with (the database refuses another), and the pass leaves no row under the old key.
@Suite("A rekey while hosts run, at the shared store")
struct OnlineRekeyTests {
    static func open(_ tenant: String, key: SymmetricKey, also others: [SymmetricKey] = [], name: String,
                     leaseDuration: TimeInterval = 60) async throws -> PostgresAccountStore {
        try await PostgresAccountStore(settings: await SharedTestDatabase.settings(tenant: tenant, leaseDuration: leaseDuration),
                                       key: key, otherKeys: others, hostName: name, logger: Fixtures.logger)
    }

    /// Runs a pass to its end as `store rekey` does; returns how many rows it resealed.
    static func pass(_ store: PostgresAccountStore) async throws -> Int {
        var (after, total): (UUID?, Int) = (nil, 0)
        while true {
            let batch = try await store.resealBatch(after: after, limit: 7, skipping: [])
            total += batch.resealed
            #expect(batch.unopened.isEmpty)
            guard let last = batch.last else {
                if try await store.rowsUnderOtherKeys() == 0 { return total }
                after = nil
                continue
            }
            after = last
        }
    }

    @Test("""
        a host with both keys opens rows under either; once the tenant names the new key, a host with the old one only \
        has its sealed writes refused by the database (nothing written) and its reads of resealed rows fail without \
        marking them; the pass leaves every row, seal and client key under the new key, which alone then opens them
        """)
    func wholeRotation() async throws {
        let tenant = SharedTestDatabase.freshTenant()
        let (old, new) = (SymmetricKey(size: .bits256), SymmetricKey(size: .bits256))
        let (oldPrint, newPrint) = (StoreKey.keyFingerprint(old), StoreKey.keyFingerprint(new))
        let behind = try await Self.open(tenant, key: old, name: "behind")
        let both = try await Self.open(tenant, key: old, also: [new], name: "both", leaseDuration: 4)
        let command = try await Self.open(tenant, key: old, also: [new], name: "rekey")
        let stores = [behind, both, command]
        do {
            var (records, secretsOf): ([AccountRecord], [UUID: AccountSecrets]) = ([], [:])
            for index in 0..<20 {
                let record = Fixtures.record(did: "did:plc:rotate\(index)", isDefault: index == 3)
                secretsOf[record.id] = Fixtures.secrets()
                try await behind.insert(record, secrets: secretsOf[record.id]!)
                records.append(record)
            }
            try await behind.addClientKey(StoredClientKey(keyID: "k1", privateKey: Data(repeating: 7, count: 32), createdAt: Date()))
            #expect(try await both.sealingKeys() == SealingKeyReport(held: [oldPrint, newPrint], writing: oldPrint, tenant: nil,
                                                                      rows: [oldPrint: 21]))

            // A refresh the host with the old key only started before the rekey...
            let first = records[0].id
            #expect(try await behind.claimRefresh(id: first, expecting: 1, at: Date()) == .granted(interruptedAt: nil))
            // ...then the key named, and (as once every live host took it up) the old key no longer accepted.
            try await command.beginWritingKey(newPrint)
            try await command.endPreviousKey()
            // That host starts no refresh now (its tokens could not be saved)...
            let noClaim = await #expect(throws: StoreError.self) {
                try await behind.claimRefresh(id: records[2].id, expecting: 1, at: Date())
            }
            #expect(noClaim?.description.contains("no refresh starts here") == true, "\(String(describing: noClaim))")
            #expect(try await command.refreshLease(id: records[2].id) == nil)
            // ...and the save of the one it started is refused whole, the stored tokens unchanged.
            let refused = await #expect(throws: StoreError.self) {
                try await behind.saveRefreshedSession(id: first, secrets: Fixtures.secrets(), accessExpiresAt: nil,
                                                      refreshExpiresAt: nil, at: Date(), replacing: 1)
            }
            #expect(refused?.description.contains("now seals with the key \(newPrint)") == true, "\(String(describing: refused))")
            #expect(try await command.secrets(for: first) == secretsOf[first])

            // The host with both keys adopts the new key at its next beat, and its saves are sealed under it.
            await both.observeChanges(keeping: { [] }) { _ in }
            let deadline = ContinuousClock.now + .seconds(20)
            while try await both.sealingKeys().writing != newPrint, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(100)) }
            #expect(try await both.sealingKeys().writing == newPrint)
            let rotated = AccountSecrets(accessToken: "rotated-access", refreshToken: "rotated-refresh")
            let second = records[1].id
            #expect(try await both.claimRefresh(id: second, expecting: 1, at: Date()) == .granted(interruptedAt: nil))
            #expect(try await both.saveRefreshedSession(id: second, secrets: rotated, accessExpiresAt: nil, refreshExpiresAt: nil,
                                                        at: Date(), replacing: 1) == 2)

            // The pass: every row, and the client key, resealed; nothing else changed. The row
            // saved under the new key is taken too: its metadata seal was still the old key's.
            #expect(try await command.resealClientKeys().isEmpty)
            #expect(try await Self.pass(command) == 20)
            #expect(try await both.sealingKeys().rows == [newPrint: 21])
            #expect(try await command.account(id: second)?.secretsVersion == 2)

            // The old key alone opens nothing any more, and a host that knows the tenant's key
            // (from its start or its last beat) says why without marking a row.
            let stale = try await Self.open(tenant, key: old, name: "stale")
            let refusedRead = await #expect(throws: StoreError.self) { try await stale.secrets(for: records[5].id) }
            #expect(refusedRead?.description.contains("sealed under the key \(newPrint), which this host does not hold") == true,
                    "\(String(describing: refusedRead))")
            await #expect(throws: StoreError.self) { try await stale.account(id: records[5].id) }
            await stale.close()
            #expect(try await command.account(id: records[5].id)?.state == .active)

            // A host with the new key only opens every row, seal and client key; one with the old key only may not start.
            let fresh = try await Self.open(tenant, key: new, name: "fresh")
            try await fresh.verifyKeyAsHost()
            for record in records {
                let stored = try #require(try await fresh.account(id: record.id))
                #expect(!stored.isAltered, "\(record.did)")
                #expect(try await fresh.secrets(for: record.id) == (record.id == second ? rotated : secretsOf[record.id]))
            }
            #expect(try await fresh.defaultAccount()?.id == records[3].id)
            #expect(try await fresh.clientKeys().map(\.keyID) == ["k1"])
            await fresh.close()
            let late = try await Self.open(tenant, key: old, name: "late")
            let lateError = await #expect(throws: StoreError.self) { try await late.verifyKeyAsHost() }
            #expect(lateError?.description.contains("seals with the key \(newPrint)") == true, "\(String(describing: lateError))")
            await late.close()
        } catch {
            for store in stores { await store.close() }
            throw error
        }
        for store in stores { await store.close() }
    }

    @Test("a pass while a host keeps refreshing 50 accounts: every save lands (retried when refused), none is lost, all end under the new key")
    func passUnderRefreshes() async throws {
        let tenant = SharedTestDatabase.freshTenant()
        let (old, new) = (SymmetricKey(size: .bits256), SymmetricKey(size: .bits256))
        let newPrint = StoreKey.keyFingerprint(new)
        let host = try await Self.open(tenant, key: old, also: [new], name: "host", leaseDuration: 4)
        let command = try await Self.open(tenant, key: old, also: [new], name: "rekey")
        do {
            let records = (0..<50).map { Fixtures.record(did: "did:plc:busy\($0)") }
            for record in records { try await host.insert(record, secrets: Fixtures.secrets()) }
            await host.observeChanges(keeping: { [] }) { _ in }
            let stop = Mutex(false)
            // The host's refreshes: each account in turn, each save retried with a backoff when
            // refused (as the daemon keeps rotated tokens and saves them again).
            let refresher = Task { () -> [UUID: (version: Int64, secrets: AccountSecrets)] in
                var latest: [UUID: (version: Int64, secrets: AccountSecrets)] = [:]
                var round = 0
                while !stop.withLock({ $0 }) || round < 2 {
                    for record in records {
                        let version = latest[record.id]?.version ?? 1
                        guard try await host.claimRefresh(id: record.id, expecting: version, at: Date()) == .granted(interruptedAt: nil)
                        else { Issue.record("claim refused"); continue }
                        let rotated = AccountSecrets(accessToken: "a-\(round)-\(record.did)", refreshToken: "r-\(round)-\(record.did)")
                        var delay = Duration.milliseconds(50)
                        while true {
                            do {
                                let saved = try await host.saveRefreshedSession(id: record.id, secrets: rotated, accessExpiresAt: nil,
                                                                                refreshExpiresAt: nil, at: Date(), replacing: version)
                                latest[record.id] = (saved, rotated)
                                break
                            } catch let error as StoreError {
                                guard case .database = error else { throw error }
                                try await Task.sleep(for: delay)
                                delay = min(delay * 2, .seconds(1))
                            }
                        }
                    }
                    round += 1
                }
                return latest
            }
            try await command.beginWritingKey(newPrint)
            // The host takes the key up at its next beat; its saves meanwhile, under the old key, are accepted.
            let deadline = ContinuousClock.now + .seconds(20)
            while try await host.sealingKeys().writing != newPrint, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
            try await command.endPreviousKey()
            _ = try await Self.pass(command)
            stop.withLock { $0 = true }
            let latest = try await refresher.value
            // Rows the host saved after the pass swept them are under the new key too.
            #expect(try await command.rowsUnderOtherKeys() == 0)
            let fresh = try await Self.open(tenant, key: new, name: "fresh")
            for record in records {
                let expected = try #require(latest[record.id])
                #expect(try await fresh.secrets(for: record.id) == expected.secrets, "\(record.did)")
                #expect(try await fresh.account(id: record.id)?.secretsVersion == expected.version)
            }
            await fresh.close()
        } catch {
            await host.close()
            await command.close()
            throw error
        }
        await host.close()
        await command.close()
    }

    @Test("""
        change announcements during the move from one key to the other: a host holding both hears, and is heard by, \
        hosts on the old key and on the new key alone
        """)
    func announcementsAcrossKeys() async throws {
        let tenant = SharedTestDatabase.freshTenant()
        let (old, new) = (SymmetricKey(size: .bits256), SymmetricKey(size: .bits256))
        let command = try await Self.open(tenant, key: old, also: [new], name: "rekey")
        let record = Fixtures.record()
        try await command.insert(record, secrets: Fixtures.secrets())
        try await command.beginWritingKey(StoreKey.keyFingerprint(new))
        let oldOnly = try await Self.open(tenant, key: old, name: "old")
        let both = try await Self.open(tenant, key: old, also: [new], name: "both")
        let newOnly = try await Self.open(tenant, key: new, name: "new")
        let hosts = [oldOnly, both, newOnly]
        let heard = Mutex<[Int: Set<UUID>]>([:])
        for (index, host) in hosts.enumerated() {
            await host.observeChanges(keeping: { [] }) { change in
                // `.everything` (a listener that reconnected reads every account again) hears it too.
                let id = if case .account(let id) = change { id } else { record.id }
                heard.withLock { _ = $0[index, default: []].insert(id) }
            }
        }
        /// Whether host `index` hears the change. A NOTIFY lands in milliseconds; the bound is
        /// generous because under `make test` the other suites can hold both of the cooperative
        /// pool's threads for seconds, and a listener whose first LISTEN failed hears it as
        /// `.everything` only after its reconnection's backoff. Every call here expects a yes, so
        /// the wait ends at the first one.
        func hears(_ index: Int) async throws -> Bool {
            let deadline = ContinuousClock.now + .seconds(30)
            while ContinuousClock.now < deadline {
                if heard.withLock({ $0[index]?.contains(record.id) == true }) { return true }
                try await Task.sleep(for: .milliseconds(20))
            }
            return false
        }
        func reset() { heard.withLock { $0 = [:] } }
        let profile = AccountProfile(displayName: "x", avatar: nil, description: nil, fetchedAt: Date())
        try await both.setProfile(id: record.id, profile, at: Date())
        let (oldHeard, newHeard) = (try await hears(0), try await hears(2))
        #expect(oldHeard && newHeard, "hosts on either key hear the host holding both")
        reset()
        try await oldOnly.setProfile(id: record.id, profile, at: Date())
        #expect(try await hears(1), "the host holding both hears one on the old key")
        reset()
        try await newOnly.setProfile(id: record.id, profile, at: Date())
        #expect(try await hears(1), "the host holding both hears one on the new key alone")
        // A refresh's save: the same update, sent through `notifying` on both channels by the
        // host holding both keys, and as the prepared statement by a host holding one.
        reset()
        let rotated = Fixtures.secrets()
        #expect(try await both.saveRefreshedSession(id: record.id, secrets: rotated, accessExpiresAt: nil, refreshExpiresAt: nil,
                                                    scope: "atproto", handle: nil, at: Date(), replacing: 1) == 2)
        let (oldHeardSave, newHeardSave) = (try await hears(0), try await hears(2))
        #expect(oldHeardSave && newHeardSave, "hosts on either key hear the save of the host holding both")
        reset()
        #expect(try await newOnly.saveRefreshedSession(id: record.id, secrets: rotated, accessExpiresAt: nil, refreshExpiresAt: nil,
                                                       scope: nil, handle: nil, at: Date(), replacing: 2) == 3)
        #expect(try await hears(1), "the host holding both hears the save of a host on the new key alone")
        let (stored, version) = (try await both.secrets(for: record.id), try await both.account(id: record.id)?.secretsVersion)
        #expect(stored == rotated && version == 3)
        for host in hosts + [command] { await host.close() }
    }

    @Test("a row whose key name and PDS were rewritten without the key reads as altered; it stops no read of the others, and no host reads it as merely behind")
    func forgedKeyName() async throws {
        let tenant = SharedTestDatabase.freshTenant()
        let key = SymmetricKey(size: .bits256)
        let host = try await Self.open(tenant, key: key, name: "host")
        do {
            let (victim, other) = (Fixtures.record(), Fixtures.record())
            try await host.insert(victim, secrets: Fixtures.secrets())
            try await host.insert(other, secrets: Fixtures.secrets())
            _ = try await SharedTestDatabase.server.run("""
                UPDATE account SET metadata_sealed_by = 'ffffffffffffffff', sealed_by = 'ffffffffffffffff',
                    pds = 'https://evil.example.test' WHERE id = '\(victim.id.uuidString.lowercased())'
                """)
            #expect(try await host.account(id: victim.id)?.isAltered == true)
            await #expect(throws: StoreError.recordAltered(account: victim.id)) { try await host.secrets(for: victim.id) }
            #expect(try await host.account(id: other.id)?.isAltered == false)
            #expect(try await host.count() == 2)
        } catch {
            await host.close()
            throw error
        }
        await host.close()
    }

    @Test("a pass meets a row changed without the key: its secrets are resealed, its broken seal is left naming the old key, and the row is listed, not blessed")
    func alteredRowListed() async throws {
        let tenant = SharedTestDatabase.freshTenant()
        let (old, new) = (SymmetricKey(size: .bits256), SymmetricKey(size: .bits256))
        let (oldPrint, newPrint) = (StoreKey.keyFingerprint(old), StoreKey.keyFingerprint(new))
        let command = try await Self.open(tenant, key: old, also: [new], name: "rekey")
        do {
            let (victim, other) = (Fixtures.record(), Fixtures.record())
            let secrets = Fixtures.secrets()
            try await command.insert(victim, secrets: secrets)
            try await command.insert(other, secrets: Fixtures.secrets())
            _ = try await SharedTestDatabase.server.run(
                "UPDATE account SET pds = 'https://evil.example.test' WHERE id = '\(victim.id.uuidString.lowercased())'")
            try await command.beginWritingKey(newPrint)
            try await command.endPreviousKey()
            let batch = try await command.resealBatch(after: nil, skipping: [])
            #expect(batch.altered == [victim.id] && batch.unopened.isEmpty && batch.resealed == 2)
            #expect(try await command.resealBatch(after: nil, skipping: batch.altered).last == nil, "nothing else is left")
            let labels = try await SharedTestDatabase.server.run(
                "SELECT sealed_by || '/' || metadata_sealed_by FROM account WHERE id = '\(victim.id.uuidString.lowercased())'")
            #expect(labels.contains("\(newPrint)/\(oldPrint)"), "\(labels)")
            let fresh = try await Self.open(tenant, key: new, name: "fresh")
            #expect(try await fresh.account(id: victim.id)?.isAltered == true)
            #expect(try await fresh.account(id: other.id)?.isAltered == false)
            await fresh.close()
        } catch {
            await command.close()
            throw error
        }
        await command.close()
    }
}
