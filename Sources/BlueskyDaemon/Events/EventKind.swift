/// What an event says happened (docs/PROTOCOL.md, "Events"). The raw values are the stable
/// names clients filter on.
enum EventKind: String, Sendable, CaseIterable {
    case accountAdded = "account.added"
    case accountRemoved = "account.removed"
    case accountRefreshed = "account.refreshed"
    case accountRetrying = "account.retrying"
    /// A retrying account works again without a new refresh (the store took its tokens).
    case accountRecovered = "account.recovered"
    case accountNeedsLogin = "account.needsLogin"
    case accountMoved = "account.moved"
    case accountHandleChanged = "account.handleChanged"
    case accountSessionEndingSoon = "account.sessionEndingSoon"
    case accountProfileUpdated = "account.profileUpdated"
    /// A server refused a call for a scope the OAuth session lacks.
    case accountNeedsScope = "account.needsScope"
    case accountDefaultChanged = "account.defaultChanged"
    /// The account's row was found without a seal that holds: someone without the store key
    /// changed it, or it waits for `blueskyd store reseal`. Its tokens go nowhere.
    case accountTampered = "account.tampered"
    case loginCompleted = "login.completed"
    case loginFailed = "login.failed"
    case daemonStoreUnavailable = "daemon.storeUnavailable"
    case daemonStoreAvailable = "daemon.storeAvailable"
    case daemonStopping = "daemon.stopping"

    /// Daemon-wide events reach a subscriber whatever accounts it asked for.
    var isDaemonWide: Bool { rawValue.hasPrefix("daemon.") }

    static var names: String { allCases.map(\.rawValue).joined(separator: ", ") }
}
