import AccountStoreCore
import Foundation
import JSONRPC
import Logging

/// Writing a registry into a store that holds accounts (`--merge` on `store copy` and `store
/// import`): the store read as a copy's source is (still, its key checked, every row's seal
/// holding), and replaced whole by the union, each account keeping its newer session
/// (`RegistryMerge`). A merge killed at any point leaves the store as it was.
extension StoreEndpoint {
    /// A store a merge writes into, open under its key, with what it holds.
    struct MergeTarget {
        let store: any AccountStore
        let merge: RegistryMerge
        let extras: RegistryExtras
    }

    /// Opens this store for a merge; nil when there is none yet or it holds nothing (then the
    /// copy or import is a plain one). Refused as a copy's source is: a live host of the
    /// tenant (it holds rows the merge replaces), a wrong key, a row whose seal fails.
    func openForMerge(daemon: Daemon) async throws(DaemonStartupError) -> MergeTarget? {
        guard let store = try await open(with: daemon, creating: false) else { return nil }
        do {
            let survey = try await checkStill(store, doing: "merge")
            guard survey.accounts > 0 || survey.clientKeys > 0 else {
                await store.close()
                return nil
            }
            let merge = try await reading { () throws(StoreError) in try await RegistryMerge.reading(store) }
            return MergeTarget(store: store, merge: merge, extras: survey.extras)
        } catch {
            await store.close()
            throw error
        }
    }

    /// Replaces this store with the merge of what `produce` writes (the source's accounts) and
    /// what it holds; closes `target`'s store.
    func mergeRegistry(_ target: MergeTarget, sourceExtras: RegistryExtras, daemon: Daemon, logger: Logger,
                       input: InputFailure, _ produce: @escaping @Sendable (any RegistryWriter) async throws(StoreError) -> Void)
        async throws(DaemonStartupError) {
        let clientKeys: [StoredClientKey]
        do {
            clientKeys = try RegistryMerge.clientKeys(source: sourceExtras.clientKeys, target: target.extras.clientKeys)
        } catch {
            await target.store.close()
            throw DaemonStartupError("cannot merge into \(location): \(error); nothing was written", exitCode: .dataError)
        }
        // Nonces of rows the merge drops go too (each store keeps those of its accounts only).
        let extras = RegistryExtras(clientKeys: clientKeys, nonces: target.extras.nonces + sourceExtras.nonces)
        let (store, merge) = (target.store, target.merge)
        do {
            try await importRegistry(extras: extras, daemon: daemon, logger: logger, input: input, replacing: store) { writer throws(StoreError) in
                try await produce(MergingWriter(writer, merge: merge, side: .source))
                _ = try await RegistryCopy.copyAccounts(from: store, into: MergingWriter(writer, merge: merge, side: .target),
                                                        progress: { _ in }, sourceFailed: { input.record(self.readFailure($0)) })
            }
        } catch {
            await store.close()
            throw error
        }
        await store.close()
    }
}

extension StoreEndpoint {
    /// A dry run's merge: the source's accounts (metadata only) through `merge`'s decisions.
    static func dryMerge(_ merge: RegistryMerge, from store: any AccountStore, source: StoreEndpoint) async throws(DaemonStartupError) {
        var after: AccountPageKey?
        while true {
            let page = try await source.reading { () throws(StoreError) in
                try await store.portableAccounts(after: after, limit: RegistryCopy.pageSize)
            }
            guard let last = page.last?.record else { return }
            for account in page { _ = merge.admit(account) }
            after = AccountPageKey(createdAt: last.createdAt, id: last.id)
        }
    }
}

extension RegistryMerge {
    /// The merge in a report's words.
    var summary: String {
        let replaced = decisions.filter { $0.kept == .source }.count
        var lines = ["  merged with the \(targetAccounts) account\(targetAccounts == 1 ? "" : "s") the target held: \(added.count) added, "
                     + "\(replaced) replaced by the source's newer session, \(decisions.count - replaced) kept (the target's "
                     + "was newer or as new)"]
        for decision in decisions.prefix(20) {
            lines.append("    \(decision.did): the \(decision.kept.rawValue)'s session (issued "
                         + "\(decision.sourceIssuedAt.formatted(.iso8601)) in the source, "
                         + "\(decision.targetIssuedAt.formatted(.iso8601)) in the target"
                         + (decision.bySealedTokens ? ", by its tokens)" : ", by the rows' dates: the tokens do not say)"))
        }
        if decisions.count > 20 { lines.append("    … and \(decisions.count - 20) more (--json lists every one)") }
        return lines.joined(separator: "\n")
    }

    var json: JSONValue {
        [
            "targetAccounts": .number(Double(targetAccounts)), "added": .number(Double(added.count)),
            "addedAccounts": .array(added.map(JSONValue.string)),
            "replaced": .number(Double(decisions.filter { $0.kept == .source }.count)),
            "kept": .number(Double(decisions.filter { $0.kept == .target }.count)),
            "accounts": .array(decisions.map {
                ["did": .string($0.did), "kept": .string($0.kept.rawValue),
                 "sourceIssuedAt": .string($0.sourceIssuedAt.formatted(.iso8601)),
                 "targetIssuedAt": .string($0.targetIssuedAt.formatted(.iso8601)),
                 "bySealedTokens": .bool($0.bySealedTokens)]
            }),
        ]
    }
}
