import AccountStoreCore
import Foundation
import PostgresStore

/// What a copy or an export asks of the store it reads: still, opened by its key, every row's
/// seal holding.
extension StoreEndpoint {
    /// Checks `store` (opened from this endpoint) and reads what it holds, metadata only.
    /// - Parameter doing: "copy" or "export", for the messages.
    func checkStill(_ store: any AccountStore, doing: String) async throws(DaemonStartupError) -> RegistryCopy.Survey {
        if let shared = store as? PostgresAccountStore {
            let hosts = try await reading { () throws(StoreError) in try await shared.liveHosts() }
            guard hosts.isEmpty else {
                throw DaemonStartupError("hosts of the tenant are running on \(location): \(hosts.joined(separator: ", ")); "
                                         + "stop them first, so that no token rotates during the \(doing)", exitCode: .alreadyRunning)
            }
        }
        do {
            try await store.verifyKey()
        } catch .secretDoesNotOpen, .clientKeyDoesNotOpen {
            throw Daemon.wrongStoreKey(keyFile: keyFile, location: location)
        } catch {
            throw DaemonStartupError("cannot read \(location): \(error)")
        }
        let survey = try await reading { () throws(StoreError) in try await RegistryCopy.survey(store) }
        guard survey.altered.isEmpty else {
            let named = survey.altered.prefix(10).map { "\($0.id.uuidString.lowercased()) (\(StoreReseal.visible($0.did)))" }
                .joined(separator: ", ")
            throw DaemonStartupError(
                "\(survey.altered.count) account\(survey.altered.count == 1 ? "" : "s") of \(location) fail their seal; a "
                    + "\(doing) would seal \(survey.altered.count == 1 ? "it" : "them") under its key: \(named); see "
                    + "`blueskyd store reseal --dry-run`, then log them in again or remove them; nothing was written",
                exitCode: .dataError)
        }
        return survey
    }

    /// Checks, as a copy ends (before it commits), that no host of the source's tenant started
    /// meanwhile: one would rotate tokens the copy already took.
    func stillAtEnd(_ store: any AccountStore, input: InputFailure) async throws(StoreError) {
        guard let shared = store as? PostgresAccountStore else { return }
        let hosts: [String]
        do {
            hosts = try await shared.liveHosts()
        } catch {
            input.record(readFailure(error))
            throw error
        }
        guard hosts.isEmpty else {
            input.record(DaemonStartupError("a host of the tenant started on \(location) during the copy (\(hosts.joined(separator: ", "))): "
                                            + "nothing was written; stop it and copy again", exitCode: .alreadyRunning))
            throw StoreError.database(context: "copying", reason: "a host of the source started")
        }
    }

    /// A failure to read this store, as one line with the right exit status.
    func readFailure(_ error: StoreError) -> DaemonStartupError {
        switch error {
        case .unreachable(_, let reason):
            DaemonStartupError("cannot reach \(location): \(reason); nothing was written", exitCode: .unavailable)
        case .secretDoesNotOpen, .recordAltered:
            DaemonStartupError("cannot read \(location): \(error) (see `blueskyd store reseal --dry-run`); nothing was written",
                               exitCode: .dataError)
        default:
            DaemonStartupError("cannot read \(location): \(error); nothing was written")
        }
    }

    /// `body`'s reads of this store, their failure said as one line with the right exit status.
    func reading<T>(_ body: () async throws(StoreError) -> T) async throws(DaemonStartupError) -> T {
        do {
            return try await body()
        } catch .unreachable(_, let reason) {
            throw DaemonStartupError("cannot reach \(location): \(reason)", exitCode: .unavailable)
        } catch {
            throw DaemonStartupError("cannot read \(location): \(error)")
        }
    }
}
