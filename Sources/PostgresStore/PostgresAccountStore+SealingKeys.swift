import AccountStoreCore
import Foundation
import PostgresNIO

/// Which key a tenant's hosts seal with, during a rekey while they run (docs/design/rekey.md).
///
/// A host holds `store.key` and, during a rotation, a second key. The tenant's row of
/// `blueskyd_tenant_key` names the one every host writes with (none: each host's `store.key`);
/// hosts read it at start and at every beat, and a trigger refuses any sealed value written
/// under another key. Rows say which key sealed them (`sealed_by`, `metadata_sealed_by`), so a
/// pass can find those still under the old key, and a host can count them.
extension PostgresAccountStore {
    /// A sealed value and the fingerprint of the key that sealed it, written together.
    struct Sealed: Sendable {
        let bytes: ByteBuffer
        let by: String
    }

    /// How often hosts beat (and read the tenant's writing key): a pass that found only rows
    /// locked by hosts' refreshes waits this long before it sweeps again.
    public var beatInterval: Duration { .milliseconds(Int(beat * 1000)) }

    /// The key the tenant names, if any.
    static func tenantWritingKey(_ tenant: String, on session: PostgresSession) async throws -> String? {
        try await session.run("SELECT fingerprint FROM blueskyd_tenant_key WHERE tenant = \(tenant)").first?.decode(String.self)
    }

    /// Seals with the tenant's writing key when this host holds it (else with `store.key`, when
    /// the tenant names none). Returns the key the tenant names that this host lacks, if so:
    /// every sealed write of this host is then refused by the database.
    @discardableResult
    func adoptWritingKey(_ named: String?) -> String? {
        tenantKey.withLock { $0 = named }
        let wanted = named ?? firstKey
        let (switched, missing) = sealing.withLock { sealer -> (String?, String?) in
            guard sealer.writingFingerprint != wanted else { return (nil, nil) }
            guard let next = sealer.writing(with: wanted) else { return (nil, wanted) }
            sealer = next
            return (wanted, nil)
        }
        if let switched {
            logger.notice("this host now seals with another of its keys: the tenant's (a store rekey)", metadata: [
                "writing-key": "\(switched)"])
        }
        return missing
    }

    /// Reads the tenant's writing key and adopts it (at start; a beat does so in its transaction).
    /// A host that lacks it is refused by `verifyKeyAsHost`; a store command that replaces the
    /// tenant's rows names its own key.
    func adoptWritingKey() async throws(StoreError) {
        let tenant = settings.tenant
        adoptWritingKey(try await read("reading the tenant's store key") { session in try await Self.tenantWritingKey(tenant, on: session) })
    }

    /// Said at error once per beat: this host's saves fail until it holds the key.
    func noteMissingWritingKey(_ missing: String) {
        logger.error("""
            the tenant's rows are now sealed with a key this host does not hold (a store rekey): its writes are refused \
            until it runs with that key; restart it with the key installed as store.key
            """, metadata: [
                        "writing-key": "\(missing)", "held-keys": "\(sealer.fingerprints.joined(separator: ","))"])
    }

    /// Throws unless what this host seals would be accepted: the tenant names no key, or one it
    /// holds (taken up now), or the previous one while hosts take the new one up.
    func requireSavable(named: String?, previous: String?) throws(StoreError) {
        guard let named else { return }
        if let missing = adoptWritingKey(named) {
            guard let previous, sealer.writingFingerprint == previous else {
                throw StoreError.database(context: "marking a refresh as started", reason: "tenant \(settings.tenant) seals with the "
                    + "key \(missing) (a store rekey), which this host does not hold: no refresh starts here until it runs with "
                    + "that key (install it as store.key.new, restart)")
            }
        }
    }

    /// Refuses a host's start when the tenant names a writing key this host lacks (exit 78).
    static func requireWritingKey(_ tenant: String, sealer: SecretSealer, location: String,
                                  on session: PostgresSession) async throws {
        guard let named = try await tenantWritingKey(tenant, on: session), !sealer.fingerprints.contains(named) else { return }
        throw StoreError.keyInvalid(path: location, reason: "tenant \(tenant) seals with the key \(named) (a store rekey), which this "
                                    + "host does not hold (it holds \(sealer.fingerprints.joined(separator: ", "))): install that key "
                                    + "as store.key")
    }

    // MARK: - What `daemon.status` and `store rekey` show

    /// What `daemon.status` shows, without waiting for the database (a status must answer when
    /// the database is silent): the keys as this host holds them now, and the rows per key as
    /// last counted; a count older than two seconds is started again in the background.
    public func sealingKeysNow() -> SealingKeyReport {
        let sealer = sealer
        let (rows, countedAt, count) = rowCounts.withLock { counts -> ([String: Int], Date?, Bool) in
            let stale = counts.at.map { ContinuousClock.now - $0 > .seconds(2) } ?? true
            let start = stale && !counts.counting
            if start { counts.counting = true }
            return (counts.rows, counts.countedAt, start)
        }
        if count {
            Task { [self] in
                let report = try? await sealingKeys()
                rowCounts.withLock { counts in
                    counts.counting = false
                    if let report { (counts.rows, counts.at, counts.countedAt) = (report.rows, .now, Date()) }
                }
            }
        }
        var report = SealingKeyReport(held: sealer.fingerprints, writing: sealer.writingFingerprint,
                                      tenant: tenantKey.withLock { $0 }, rows: rows)
        report.countedAt = countedAt
        return report
    }

    /// The keys this host holds and writes with, the tenant's, and how many rows each seals.
    public func sealingKeys() async throws(StoreError) -> SealingKeyReport {
        let (tenant, sealer) = (settings.tenant, sealer)
        return try await read("counting rows per store key") { [self] session in
            let named = try await Self.tenantWritingKey(tenant, on: session)
            var rows: [String: Int] = [:]
            // A row from before the column is under the key the tenant's hosts held then: this
            // host's `store.key` while no rekey named another (every host's start checks it).
            let unnamed = named == nil ? self.firstKey : StoreKey.unrecordedLabel
            for row in try await session.run("""
                SELECT sealed_by, count(*) FROM account WHERE tenant = \(tenant) GROUP BY sealed_by
                UNION ALL
                SELECT sealed_by, count(*) FROM oauth_client_key WHERE tenant = \(tenant) GROUP BY sealed_by
                """) {
                let (key, count) = try row.decode((String?, Int).self)
                rows[key ?? unnamed, default: 0] += count
            }
            return SealingKeyReport(held: sealer.fingerprints, writing: sealer.writingFingerprint, tenant: named, rows: rows)
        }
    }

    /// The tenant's live hosts and the keys each said it holds at its last beat.
    public func liveHostKeys() async throws(StoreError) -> [(owner: String, keys: [String])] {
        let tenant = settings.tenant
        return try await read("reading the tenant's live hosts") { session in
            try await session.run("""
                SELECT owner, coalesce(keys, '{}') FROM blueskyd_host WHERE tenant = \(tenant)
                    AND alive_until > \(unescaped: Self.databaseNow) ORDER BY owner
                """).map { try $0.decode((String, [String]).self) }.map { (owner: $0.0, keys: $0.1) }
        }
    }

    /// Names `fingerprint` as the key every host of the tenant writes with, and adopts it here.
    /// The key the tenant wrote with until now stays accepted (`previous`) until
    /// `endPreviousKey`: hosts take the new one up at their next beat, and a save sealed under
    /// the old one meanwhile is not refused.
    public func beginWritingKey(_ fingerprint: String) async throws(StoreError) {
        let (tenant, current) = (settings.tenant, sealer.writingFingerprint)
        guard sealer.fingerprints.contains(fingerprint) else {
            throw StoreError.keyInvalid(path: location, reason: "this store does not hold the key \(fingerprint)")
        }
        try await write("naming the tenant's store key") { session in
            try await session.run("""
                INSERT INTO blueskyd_tenant_key (tenant, fingerprint, previous, since)
                VALUES (\(tenant), \(fingerprint), \(current), \(unescaped: Self.databaseNow))
                ON CONFLICT (tenant) DO UPDATE SET since = excluded.since, fingerprint = excluded.fingerprint,
                    previous = CASE WHEN blueskyd_tenant_key.fingerprint = excluded.fingerprint THEN blueskyd_tenant_key.previous
                                    ELSE blueskyd_tenant_key.fingerprint END
                """)
        }
        adoptWritingKey(fingerprint)
    }

    /// From now on the database refuses any sealed value written under another key than the
    /// tenant's (every live host said it writes with it).
    public func endPreviousKey() async throws(StoreError) {
        let (tenant, writing) = (settings.tenant, sealer.writingFingerprint)
        try await write("retiring the tenant's previous store key") { session in
            try await session.run("UPDATE blueskyd_tenant_key SET previous = NULL WHERE tenant = \(tenant) AND fingerprint = \(writing)")
        }
    }
}

/// Rows per key as last counted.
struct RowCounts: Sendable {
    var rows: [String: Int] = [:]
    var at: ContinuousClock.Instant?
    var countedAt: Date?
    var counting = false
}

/// What `PostgresAccountStore.sealingKeys` found.
public struct SealingKeyReport: Sendable, Equatable {
    /// The fingerprints of the keys this host holds, the one it writes with first.
    public var held: [String]
    public var writing: String
    /// The key the tenant names (a rekey named it), if any.
    public var tenant: String?
    /// Rows (accounts and OAuth client keys) per fingerprint of the key that sealed them.
    public var rows: [String: Int]
    /// When `rows` were counted (`sealingKeysNow`: counted in the background).
    public var countedAt: Date?

    public init(held: [String], writing: String, tenant: String?, rows: [String: Int]) {
        (self.held, self.writing, self.tenant, self.rows) = (held, writing, tenant, rows)
    }
}

extension StoreKey {
    /// The key of rows written before blueskyd recorded which key sealed a row.
    public static let unrecordedLabel = "unrecorded"
}
