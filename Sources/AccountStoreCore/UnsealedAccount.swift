import Foundation

/// A row whose metadata seal does not hold, as `blueskyd store reseal` shows it.
///
/// No start ever seals a row: a start that sealed whatever it found unsealed would bless a row
/// someone without the key rewrote (point `pds` elsewhere, clear the seal, delete any marker),
/// and send its tokens there. Sealing is the operator's act, with the key, one row named at a
/// time or all of them, after reading where each would send its tokens.
public struct UnsealedAccount: Sendable, Equatable {
    public enum Finding: String, Sendable, Equatable {
        /// No seal, and the secrets were written before blueskyd sealed rows (a store from
        /// before seals): the operator may seal it after checking where it points.
        case neverSealed = "never-sealed"
        /// Sealed by an older blueskyd, whose seal held over where the tokens go but did not
        /// cover the handle, its verified flag or the default flag: seal it if those are right.
        case olderSeal = "older-seal"
        /// No seal, but the secrets say the row had one: someone without the key removed it.
        /// Never sealed again: log in again.
        case sealRemoved = "seal-removed"
        /// A seal that does not match the row: the row was rewritten. Never sealed again.
        case sealBroken = "seal-broken"
        /// The secrets do not open under this key: a wrong key, or a row from another store.
        case secretsDoNotOpen = "secrets-do-not-open"
        /// A column holds a value blueskyd cannot read (`UnreadableRow`). Never sealed: log in again.
        case unreadable

        /// Only a row never sealed, or sealed by an older blueskyd and opening under this key.
        public var mayBeSealedAgain: Bool { self == .neverSealed || self == .olderSeal }
    }

    /// The row as stored (where its tokens would go: `did`, `pds`, `oauth`).
    public var record: AccountRecord
    public var finding: Finding
    /// What could not be read, for `unreadable`.
    public var detail: String?

    public init(record: AccountRecord, finding: Finding, detail: String? = nil) {
        self.record = record
        self.finding = finding
        self.detail = detail
    }

    /// Only a row that was never sealed and opens under this key can be sealed.
    public var mayBeSealed: Bool { finding.mayBeSealedAgain }

    /// What the finding means, for the operator.
    public var explanation: String {
        switch finding {
        case .neverSealed: "no seal yet (written before blueskyd sealed rows): seal it if it points where it should"
        case .olderSeal: "sealed by an older blueskyd, not over its handle and default: seal it if they are right"
        case .sealRemoved: "its seal was removed outside blueskyd (its secrets say it had one): log in again"
        case .sealBroken: "its seal does not match the row (rewritten outside blueskyd): log in again"
        case .secretsDoNotOpen: "its secrets do not open under this key"
        case .unreadable: "a column holds what blueskyd cannot read (\(detail ?? "changed outside blueskyd")): log in again"
        }
    }
}

/// Finds the sealed status of a row from its parts, the same way in every store.
package enum SealFinding {
    /// The row as `blueskyd store reseal` lists it, or nil when its seal holds.
    package static func row(_ parsed: ParsedRow, seal: Data?, blob: Data, tenant: String,
                            sealer: SecretSealer) -> UnsealedAccount? {
        switch parsed {
        case .unreadable(let standIn, let damage):
            return UnsealedAccount(record: standIn, finding: .unreadable, detail: damage.reason)
        case .readable(let record):
            return of(record, seal: seal, blob: blob, tenant: tenant, sealer: sealer)
                .map { UnsealedAccount(record: record, finding: $0) }
        }
    }

    /// nil when the seal holds.
    package static func of(_ record: AccountRecord, seal: Data?, blob: Data, tenant: String,
                           sealer: SecretSealer) -> UnsealedAccount.Finding? {
        let check = sealer.check(record, tenant: tenant, seal: seal)
        if check == .holds { return nil }
        guard (try? sealer.open(blob, account: record.id)) != nil else { return .secretsDoNotOpen }
        if check == .olderVersion { return .olderSeal }
        if seal != nil { return .sealBroken }
        return sealer.wasSealedWithMetadata(blob, account: record.id) ? .sealRemoved : .neverSealed
    }
}

extension AccountRecord {
    /// The record of a row as a store hands it back, given what its seal says.
    package func verified(by check: MetadataSealCheck) -> AccountRecord {
        switch check {
        case .holds: self
        case .olderVersion, .missing: markedAltered(.unsealed)
        case .broken: markedAltered(.tampered)
        }
    }
}
