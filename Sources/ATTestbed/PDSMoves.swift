import Synchronization

/// Account moves between the testbed's two PDS host names: a moved account's DID document names
/// `pds2.<domain>`, and the PDS refuses its tokens under the old name (as a PDS the account left
/// would). Both names serve the same accounts and repositories.
final class PDSMoves: Sendable {
    private struct State {
        var moved: Set<String> = []
        var aliasNamesRogueIssuer = false
    }

    private let state = Mutex(State())

    func hasMoved(_ did: String) -> Bool { state.withLock { $0.moved.contains(did) } }

    func setMoved(_ did: String, _ moved: Bool) {
        state.withLock { if moved { $0.moved.insert(did) } else { $0.moved.remove(did) } }
    }

    var aliasNamesRogueIssuer: Bool {
        get { state.withLock { $0.aliasNamesRogueIssuer } }
        set { state.withLock { $0.aliasNamesRogueIssuer = newValue } }
    }
}
