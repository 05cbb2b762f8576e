import AccountStoreCore
import Foundation

/// A new login of an account this daemon already keeps, replacing its session in place.
///
/// A login is an input like a refresh's outcome, and takes the refresh's turn: it waits for the
/// refresh in flight, and until it is stored no refresh starts (a call that needs a token joins
/// it and gets the new tokens). What it keeps of the session it replaces (a refresh token the
/// server did not send again) is read from the session as it is then, never from a copy taken
/// before an await: a refresh in between would have spent the copy's refresh token.
extension AccountSession {
    /// What a login stored, and the session it replaced (to be revoked, or not).
    struct SignedInAgain: Sendable {
        var record: AccountRecord
        var secrets: AccountSecrets
        var replacedRecord: AccountRecord
        /// Nil when the replaced session's tokens could not be read (a row whose seal failed).
        var replacedSecrets: AccountSecrets?
    }

    /// Stores `record` and `secrets` over this account's session (same id), once `settle` has
    /// made them from the proposed ones and the replaced session as it is now.
    /// - Parameter settle: the new record and secrets, given the proposed ones and the session
    ///   they replace (its record and tokens, nil when those cannot be read).
    func signInAgain(
        _ proposed: AccountRecord, secrets proposedSecrets: AccountSecrets,
        settle: @escaping @Sendable (AccountRecord, AccountSecrets, AccountRecord, AccountSecrets?) -> (AccountRecord, AccountSecrets)
    ) async throws(DaemonError) -> SignedInAgain {
        // The refresh in flight ends first (its rotated tokens are the ones replaced); no await
        // comes between the last one ending and this login taking the turn.
        while let running = refreshInFlight { _ = try? await running.value }
        let outcome = Task<SignedInAgain, any Error> {
            try await self.storeSignIn(proposed, secrets: proposedSecrets, settle: settle)
        }
        refreshInFlight = Task {
            defer { self.endSignInTurn() }
            return try await outcome.value.secrets
        }
        do {
            return try await outcome.value
        } catch let error as DaemonError {
            throw error
        } catch {
            throw .internalError("cannot save the account: \(error)")
        }
    }

    private func storeSignIn(
        _ proposed: AccountRecord, secrets proposedSecrets: AccountSecrets,
        settle: (AccountRecord, AccountSecrets, AccountRecord, AccountSecrets?) -> (AccountRecord, AccountSecrets)
    ) async throws(DaemonError) -> SignedInAgain {
        let replacedSecrets = try? await currentSecrets()
        let replacedRecord = state.record
        var (record, secrets) = settle(proposed, proposedSecrets, replacedRecord, replacedSecrets)
        record.id = id
        do {
            // The store keeps the account's own columns (creation date, default, profile).
            record.secretsVersion = try await environment.store.replaceSession(record, secrets: secrets)
        } catch {
            throw .internalError("cannot save the account: \(error)")
        }
        signedIn(record, secrets: secrets)
        return SignedInAgain(record: record, secrets: secrets, replacedRecord: replacedRecord, replacedSecrets: replacedSecrets)
    }

    private func endSignInTurn() {
        refreshInFlight = nil
        releaseActivityIfIdle()
    }
}
