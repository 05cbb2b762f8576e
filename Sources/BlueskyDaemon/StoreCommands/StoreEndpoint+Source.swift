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
