import AccountStoreCore
import Foundation
import Synchronization

/// Saves accounts' latest DPoP nonces in the background: what piles up while a save runs is
/// saved by the next one, a nonce replacing an older one for the same server, so that however
/// many calls bring new nonces at most one save is under way. A failed save is dropped (nonces
/// live minutes; the next rotation saves again).
final class NonceSaver: Sendable {
    private struct State {
        var pending: [NonceKey: StoredDPoPNonce] = [:]
        var saving = false
    }

    private struct NonceKey: Hashable {
        var account: UUID
        var origin: String
    }

    private let state = Mutex(State())
    private let store: any AccountStore
    private let work: BackgroundWork

    init(store: any AccountStore, work: BackgroundWork) {
        self.store = store
        self.work = work
    }

    func save(_ nonces: [StoredDPoPNonce]) {
        guard !nonces.isEmpty else { return }
        let start = state.withLock { state -> Bool in
            for nonce in nonces { state.pending[NonceKey(account: nonce.account, origin: nonce.origin)] = nonce }
            guard !state.saving else { return false }
            state.saving = true
            return true
        }
        guard start else { return }
        let started = work.start(.nonceSave) { [self] in await drain() }
        if !started { state.withLock { $0.saving = false } }
    }

    private func drain() async {
        while !Task.isCancelled {
            let batch = state.withLock { state -> [StoredDPoPNonce] in
                defer { state.pending = [:] }
                if state.pending.isEmpty { state.saving = false }
                return Array(state.pending.values)
            }
            guard !batch.isEmpty else { return }
            try? await store.saveDPoPNonces(batch)
        }
        state.withLock { $0.saving = false }
    }
}
