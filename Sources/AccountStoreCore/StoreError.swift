import Foundation

/// Everything the account registry can fail with, each as one line a user can act on.
public enum StoreError: Error, CustomStringConvertible, Sendable, Equatable {
    /// No account with this id exists (it may have been deleted meanwhile).
    case unknownAccount(UUID)
    /// An account for this DID is already registered; `existing` is its id.
    case duplicateDID(existing: UUID)
    /// An account with this id is already registered.
    case duplicateAccountID(UUID)
    /// The sealed secrets of an account do not open: wrong key, tampering,
    /// or a blob copied in from another account's row.
    case secretDoesNotOpen(account: UUID)
    /// The security-relevant columns of an account's row (auth kind, DID, PDS, authorization
    /// server endpoints) are not those blueskyd sealed: someone without the store key rewrote
    /// the row. Its tokens are sent nowhere until a new login.
    case recordAltered(account: UUID)
    /// A stored OAuth client signing key does not open (wrong store key, or tampering).
    case clientKeyDoesNotOpen(keyID: String)
    /// The secrets could not be serialised or sealed.
    case secretEncoding(account: UUID, reason: String)
    /// A key file other users could read; the key must be 0600 (owner only).
    case keyFileInsecure(path: String, mode: UInt32)
    /// A key file or credential whose content is not a 256-bit key.
    case keyInvalid(path: String, reason: String)
    /// A key file or credential that could not be read or created.
    case keyUnavailable(path: String, reason: String)
    /// A directory that could not be created or secured.
    case directory(path: String, reason: String)
    /// Another daemon holds the instance lock on this state directory.
    case alreadyRunning(pid: Int32?, directory: String)
    /// The instance lock file could not be opened or locked.
    case lockFailed(path: String, reason: String)
    /// Newer tokens than the ones a refresh started from are stored (another host refreshed the
    /// account, or a login replaced its session); the refresh's own result is not saved.
    case tokensSuperseded(UUID)
    /// A store setting that cannot be used (`store_url`, `tenant`), said as the fix.
    case invalidSetting(String)
    /// This host's clock is too far off the database's for leases to be safe, said as the fix.
    case clockOff(String)
    /// The database cannot be reached (connection refused or lost, authentication failed).
    case unreachable(location: String, reason: String)
    /// A database error, with what the store was doing at the time.
    case database(context: String, reason: String)
    /// A copy's target already holds accounts (or client keys) of the tenant: nothing written.
    case targetNotEmpty(location: String, accounts: Int)
    /// Hosts of the tenant are alive (by their lease owner names): a pass that replaces the
    /// tenant's rows (`store rekey`, a merge) writes nothing.
    case hostsAlive([String])

    /// What an account whose row was rewritten outside blueskyd shows as its state's reason.
    public static let recordAlteredReason = "the account's record was changed outside blueskyd; log in again"

    /// Whether a write that failed so may have been committed all the same: the database was
    /// lost, or did not answer in time, after the statement (or COMMIT) was sent.
    public var outcomeMayBeUnknown: Bool {
        switch self {
        case .unreachable: true
        case .database(_, let reason): !reason.contains("another host registered")
        default: false
        }
    }

    public var description: String {
        switch self {
        case .unknownAccount(let id):
            return "unknown account \(id.uuidString.lowercased())"
        case .duplicateDID(let existing):
            return "this account (DID) is already registered as \(existing.uuidString.lowercased())"
        case .duplicateAccountID(let id):
            return "an account with id \(id.uuidString.lowercased()) is already registered"
        case .secretDoesNotOpen(let account):
            return "the stored secrets of account \(account.uuidString.lowercased()) do not open "
                + "(wrong store key, or the database was tampered with)"
        case .recordAltered:
            return Self.recordAlteredReason
        case .clientKeyDoesNotOpen(let keyID):
            return "the stored OAuth client signing key \(keyID) does not open "
                + "(wrong store key, or the database was tampered with)"
        case .secretEncoding(let account, let reason):
            return "could not seal the secrets of account \(account.uuidString.lowercased()): \(reason)"
        case .keyFileInsecure(let path, let mode):
            return "the store key file \(path) is readable by other users (mode \(String(mode & 0o7777, radix: 8))); "
                + "run `chmod 600 \(path)`"
        case .keyInvalid(let path, let reason):
            return "the store key at \(path) is not usable: \(reason)"
        case .keyUnavailable(let path, let reason):
            return "cannot read or create the store key at \(path): \(reason)"
        case .directory(let path, let reason):
            return "cannot prepare directory \(path): \(reason)"
        case .alreadyRunning(let pid, let directory):
            if let pid {
                return "another blueskyd (pid \(pid)) is already using \(directory)"
            }
            return "another blueskyd is already using \(directory)"
        case .lockFailed(let path, let reason):
            return "cannot lock \(path): \(reason)"
        case .tokensSuperseded(let id):
            return "newer tokens of account \(id.uuidString.lowercased()) were stored by another host"
        case .invalidSetting(let reason), .clockOff(let reason):
            return reason
        case .unreachable(let location, let reason):
            return "cannot reach the account database \(location): \(reason)"
        case .database(let context, let reason):
            return "account database error while \(context): \(reason)"
        case .hostsAlive(let hosts):
            return "hosts of the tenant are running: \(hosts.joined(separator: ", ")); stop them first"
        case .targetNotEmpty(let location, let accounts):
            return "\(location) already holds \(accounts) account\(accounts == 1 ? "" : "s") of this tenant "
                + "(or OAuth client keys): a copy goes into an empty store only, unless --merge (each account then keeps its newer session)"
        }
    }
}

/// The text of the current `errno`, for error messages.
func errnoDescription(_ code: Int32 = errno) -> String {
    String(cString: strerror(code))
}
