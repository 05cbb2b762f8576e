import Synchronization

/// The `[[provider]]` tables in force: read at start, replaced whole by a reload (SIGHUP), so
/// that a login sees one configuration or the other, never half of each.
final class ProviderTable: Sendable {
    private let providers: Mutex<[ProviderSettings]>

    init(_ providers: [ProviderSettings] = []) {
        self.providers = Mutex(providers)
    }

    func replace(_ new: [ProviderSettings]) {
        providers.withLock { $0 = new }
    }

    /// The provider `identifier` names (its name or issuer), if any.
    func provider(named identifier: String) -> ProviderSettings? {
        providers.withLock { $0.first { $0.matches(identifier) } }
    }
}
