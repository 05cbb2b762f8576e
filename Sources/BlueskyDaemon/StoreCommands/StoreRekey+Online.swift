import AccountStoreCore
import Foundation
import JSONRPC
import PostgresStore
#if canImport(Glibc)
import Glibc
#endif

/// `blueskyd store rekey` on a PostgreSQL tenant whose hosts run (docs/design/rekey.md): every
/// live host already holds the new key (installed as `store.key.new`), so each opens rows under
/// either key. The pass names the new key as the tenant's writing key (hosts adopt it at their
/// next beat; the database refuses a sealed value written under another), then reseals the
/// rows still under another key, a batch per transaction, skipping rows a refresh holds. A kill
/// leaves rows under either key, which every host opens; running it again finishes.
extension StoreRekey {
    /// What a pass while hosts ran did.
    struct OnlineOutcome {
        let pass: Pass
        let hosts: [(owner: String, keys: [String])]
        /// The key the tenant sealed with before.
        let previous: String
        /// Rows still under another key before the pass (a dry run's answer).
        let waiting: Int
        /// nil: a dry run.
        let resealed: Int?
        var unopened: [UUID] = []
        /// Accounts whose metadata seal fails: secrets resealed, seal left broken.
        var altered: [UUID] = []
        var unopenedClientKeys: [String] = []
        var seconds: Double?
        /// Of `seconds`, the wait for every host to take the key up (at most a beat).
        var takeUpSeconds: Double?
    }

    /// How long the pass waits on rows other transactions hold before it gives up (75).
    static let stallLimit: Duration = .seconds(600)

    func rekeyWhileHostsRun(_ pass: Pass, hosts: [(owner: String, keys: [String])], daemon: Daemon) async throws(DaemonStartupError) {
        guard let store = pass.store as? PostgresAccountStore, let tenant = pass.source.tenant else { return }
        let (source, new) = (pass.source, StoreKey.keyFingerprint(pass.target.key))
        let lacking = hosts.filter { !$0.keys.contains(new) }
        guard lacking.isEmpty else {
            throw DaemonStartupError(
                "host(s) of tenant \(tenant) running without the new key \(new): \(lacking.map(\.owner).joined(separator: ", ")); "
                    + "on each, install it as store.key.new in the state "
                    + "directory (or the credential \(StoreKey.newKeyCredential)) and restart it, then run the rekey again; "
                    + "nothing was resealed", exitCode: .alreadyRunning)
        }
        // This command opens what it reseals: the rows under the tenant's key too.
        let keys = try await source.reading { () throws(StoreError) in try await store.sealingKeys() }
        if let named = keys.tenant, !keys.held.contains(named) {
            throw DaemonStartupError("tenant \(tenant) seals with the key \(named), which this command does not hold (it holds "
                                     + "\(keys.held.joined(separator: ", "))): run it where that key is store.key or store.key.new",
                                     exitCode: .configuration)
        }
        let waiting = try await source.reading { () throws(StoreError) in try await store.rowsUnderOtherKeys(than: new) }
        // The key the rows are under now: the tenant's, unless an earlier pass named the new key
        // already (then store.key's); a rollback's target is store.key, its rows the tenant's key's.
        let previous = keys.tenant.flatMap { $0 == new ? nil : $0 } ?? StoreKey.keyFingerprint(source.key)
        if options.dryRun {
            reportOnline(OnlineOutcome(pass: pass, hosts: hosts, previous: previous, waiting: waiting, resealed: nil))
            return
        }
        let progress = CopyProgress(total: waiting, shown: !options.json && isatty(STDERR_FILENO) == 1, verb: "resealed")
        var outcome = OnlineOutcome(pass: pass, hosts: hosts, previous: previous, waiting: waiting, resealed: 0)
        let started = ContinuousClock.now
        try await source.reading { () throws(StoreError) in try await store.beginWritingKey(new) }
        let behind = try await source.reading { () throws(StoreError) in try await hostsBehind(new, store: store) }
        let takenUp = ContinuousClock.now
        guard behind.isEmpty else {
            throw DaemonStartupError("host(s) running on \(source.location) did not take up the new key \(new) within three "
                                     + "beats: \(behind.joined(separator: ", ")); nothing was resealed (both keys are accepted "
                                     + "meanwhile): run the rekey again", exitCode: .alreadyRunning)
        }
        do throws(StoreError) {
            try await store.endPreviousKey()
            outcome.unopenedClientKeys = try await store.resealClientKeys()
            var (after, sweepResealed, resealed) = (UUID?.none, 0, 0)
            var stalled: ContinuousClock.Instant?
            var lastSaid: ContinuousClock.Instant?
            while true {
                let batch = try await store.resealBatch(after: after, skipping: outcome.unopened + outcome.altered)
                resealed += batch.resealed
                sweepResealed += batch.resealed
                outcome.unopened += batch.unopened
                outcome.altered += batch.altered
                progress.show(resealed)
                if let last = batch.last {
                    after = last
                    continue
                }
                // A sweep ended: done when every row left under another key is one no key opens
                // or one whose seal fails.
                let left = try await store.rowsUnderOtherKeys(excluding: outcome.unopened + outcome.altered,
                                                              clientKeys: outcome.unopenedClientKeys)
                if left <= 0 { break }
                let progressed = sweepResealed > 0
                (after, sweepResealed) = (nil, 0)
                guard !progressed else { stalled = nil; continue }
                // The rest are rows other transactions hold locked (a refresh, whose save seals
                // them under the new key anyway; or a host stopped mid-transaction): wait a beat,
                // say so, and give up once nothing moved for `stallLimit`.
                let now = ContinuousClock.now
                let since = stalled ?? now
                stalled = since
                if now - since >= Self.stallLimit {
                    progress.finish()
                    throw StoreError.database(context: "resealing", reason: "\(left) row(s) under the old key stayed locked by "
                        + "other transactions for \(Int(Self.stallLimit.components.seconds / 60)) minutes (a host stopped in a "
                        + "transaction?)")
                }
                if lastSaid.map({ now - $0 >= .seconds(60) }) ?? true {
                    lastSaid = now
                    progress.finish()
                    logger.warning("""
                        rows under the old key are locked by other transactions (refreshes, or a host stopped in a \
                        transaction); waiting for them, at most 10 minutes without progress
                        """, metadata: ["rows": "\(left)"])
                }
                try? await Task.sleep(for: store.beatInterval)
            }
            outcome = OnlineOutcome(pass: pass, hosts: hosts, previous: previous, waiting: waiting, resealed: resealed,
                                    unopened: outcome.unopened,
                                    altered: outcome.altered, unopenedClientKeys: outcome.unopenedClientKeys,
                                    takeUpSeconds: (takenUp - started).seconds)
        } catch .database(let context, let reason) where context == "resealing" {
            throw DaemonStartupError("\(reason); every host opens rows under either key: run the rekey again once they are free",
                                     exitCode: .alreadyRunning)
        } catch .unreachable(_, let reason) {
            progress.finish()
            throw DaemonStartupError("cannot reach \(source.location): \(reason); the pass stopped midway (every host opens rows "
                                     + "under either key): run it again to finish", exitCode: .unavailable)
        } catch {
            progress.finish()
            throw DaemonStartupError("the rekey stopped midway: \(error) (every host opens rows under either key): run it again "
                                     + "to finish")
        }
        progress.finish()
        outcome.seconds = (ContinuousClock.now - started).seconds
        reportOnline(outcome)
        let unopened = outcome.unopened.count + outcome.unopenedClientKeys.count
        guard unopened + outcome.altered.count == 0 else {
            throw DaemonStartupError("\(unopened) row(s) open under neither key and \(outcome.altered.count) fail their seal (listed "
                                     + "above): left as they are; see `blueskyd store reseal --dry-run`, log those accounts in again "
                                     + "or remove them", exitCode: .dataError)
        }
    }

    /// Waits until every live host of the tenant says (at its beat) that it seals with `key`;
    /// returns those that still do not after three beats. The old key is accepted meanwhile, so
    /// no host's save is refused while it has not heard of the new one.
    private func hostsBehind(_ key: String, store: PostgresAccountStore) async throws(StoreError) -> [String] {
        let deadline = ContinuousClock.now + store.beatInterval * 3 + .seconds(2)
        while true {
            let behind = try await store.liveHostKeys().filter { $0.keys.first != key }.map(\.owner)
            if behind.isEmpty || ContinuousClock.now >= deadline { return behind }
            try? await Task.sleep(for: .milliseconds(200))
        }
    }

    func reportOnline(_ outcome: OnlineOutcome) {
        let output = options.json ? Self.json(outcome) : Self.text(outcome)
        FileHandle.standardOutput.write(Data((output + "\n").utf8))
    }

    static func text(_ outcome: OnlineOutcome) -> String {
        let pass = outcome.pass
        let (old, new) = (outcome.previous, StoreKey.keyFingerprint(pass.target.key))
        let hosts = outcome.hosts.map(\.owner).joined(separator: ", ")
        let tenant = pass.source.tenant ?? ""
        guard let resealed = outcome.resealed else {
            return "Dry run: \(outcome.waiting) row(s) of tenant \(tenant) at \(pass.source.location) are under another key than "
                + "\(new); the \(outcome.hosts.count) live host(s) (\(hosts)) all hold it: a rekey would reseal them while they "
                + "run. Nothing was written."
        }
        var lines = ["Resealed \(resealed) row(s) of tenant \(tenant) at \(pass.source.location) under the key \(new), was "
                     + "\(old), while \(outcome.hosts.count) host(s) ran" + (outcome.seconds.map { String(format: ", in %.1f s", $0) } ?? "")
                     + (outcome.takeUpSeconds.map { String(format: " (%.1f s of it waiting for the hosts to take the key up).", $0) } ?? "."),
                     "  Every host of the tenant now seals with \(new); no row is left under another key"
                        + (outcome.unopened.isEmpty && outcome.altered.isEmpty && outcome.unopenedClientKeys.isEmpty
                            ? "." : " but those below.")]
        for id in outcome.unopened.prefix(20) {
            lines.append("  account \(id.uuidString.lowercased()) opens under neither key: left as it is (log it in again)")
        }
        for id in outcome.altered.prefix(20) {
            lines.append("  account \(id.uuidString.lowercased()) fails its seal (changed without the key): its secrets were "
                         + "resealed, its seal left as it is (log it in again)")
        }
        for keyID in outcome.unopenedClientKeys.prefix(20) {
            lines.append("  OAuth client key \(StoreReseal.visible(keyID)) opens under neither key: left as it is")
        }
        lines.append("  On each host (\(hosts)): move store.key.new over store.key (or install the new key as the credential "
                     + "blueskyd-store-key and remove blueskyd-store-key-new), then restart it; `bskyctl status` shows the keys "
                     + "it holds. A host started with the old key only is refused (exit 78).")
        return lines.joined(separator: "\n")
    }

    static func json(_ outcome: OnlineOutcome) -> String {
        let pass = outcome.pass
        let object: [String: JSONValue] = [
            "store": .string(pass.source.location), "whileHostsRun": true, "dryRun": .bool(outcome.resealed == nil),
            "keyFingerprint": .string(StoreKey.keyFingerprint(pass.target.key)),
            "previousKeyFingerprint": .string(outcome.previous),
            "hosts": .array(outcome.hosts.map { ["owner": .string($0.owner), "keys": .array($0.keys.map(JSONValue.string))] }),
            "underOtherKeys": .number(Double(outcome.waiting)),
            "resealed": outcome.resealed.map { .number(Double($0)) } ?? .null,
            "unopened": .array(outcome.unopened.map { .string($0.uuidString.lowercased()) }),
            "altered": .array(outcome.altered.map { .string($0.uuidString.lowercased()) }),
            "unopenedClientKeys": .array(outcome.unopenedClientKeys.map(JSONValue.string)),
            "seconds": outcome.seconds.map { .number(($0 * 1000).rounded() / 1000) } ?? .null,
            "takeUpSeconds": outcome.takeUpSeconds.map { .number(($0 * 1000).rounded() / 1000) } ?? .null,
        ]
        return String(decoding: JSONValue.object(object).encoded(), as: UTF8.self)
    }
}
