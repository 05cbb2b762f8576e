import Foundation

/// When the account's DID document is looked at again, and one look at a time.
extension AccountSession {
    /// Due every `interval`, and at once for a handle the PDS reported but nobody verified yet.
    func identityCheckDue(interval: TimeInterval) -> Bool {
        if record.handle != nil, !record.handleVerified, identityCheckInFlight == nil { return true }
        guard let identityCheckedAt else { return true }
        return environment.now().timeIntervalSince(identityCheckedAt) >= interval
    }

    func noteIdentityChecked() { identityCheckedAt = environment.now() }

    /// Runs `check` unless one is running (then waits for it) or one ran less than
    /// `minimumInterval` ago: concurrent refused calls share one look at the DID document.
    func sharedIdentityCheck(minimumInterval: TimeInterval, _ check: @escaping @Sendable () async -> Void) async {
        if let running = identityCheckInFlight { return await running.value }
        if minimumInterval > 0, let last = identityCheckedAt, environment.now().timeIntervalSince(last) < minimumInterval { return }
        let task = Task { await check() }
        identityCheckInFlight = task
        await task.value
        identityCheckInFlight = nil
        releaseActivityIfIdle()
    }
}
