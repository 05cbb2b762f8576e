import ATSyntax
import Foundation

/// Recent handle → DID and DID → document answers, kept for a short time (the spec asks for
/// minutes, not days: handles and PDSes move).
final class IdentityCache: @unchecked Sendable {
    private struct Entry<Value> {
        var value: Value
        var expires: ContinuousClock.Instant
    }

    let lifetime: Duration
    private let lock = NSLock()
    private var handles: [Handle: Entry<DID>] = [:]
    private var documents: [DID: Entry<DIDDocument>] = [:]

    init(lifetime: Duration) {
        self.lifetime = lifetime
    }

    func did(for handle: Handle) -> DID? {
        lock.withLock { Self.fresh(handles[handle]) }
    }

    func document(for did: DID) -> DIDDocument? {
        lock.withLock { Self.fresh(documents[did]) }
    }

    func store(_ did: DID, for handle: Handle) {
        guard lifetime > .zero else { return }
        lock.withLock { handles[handle] = Entry(value: did, expires: .now + lifetime) }
    }

    func store(_ document: DIDDocument, for did: DID) {
        guard lifetime > .zero else { return }
        lock.withLock { documents[did] = Entry(value: document, expires: .now + lifetime) }
    }

    func forget(_ handle: Handle) {
        _ = lock.withLock { handles.removeValue(forKey: handle) }
    }

    func forget(_ did: DID) {
        _ = lock.withLock { documents.removeValue(forKey: did) }
    }

    private static func fresh<Value>(_ entry: Entry<Value>?) -> Value? {
        guard let entry, entry.expires > .now else { return nil }
        return entry.value
    }
}
