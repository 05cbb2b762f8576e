import Foundation

/// A row some column of which holds a value blueskyd cannot read: a `state` or `auth_kind` it
/// does not know, OAuth columns set in part. Only someone writing the database outside blueskyd
/// (or a newer blueskyd sharing it) makes one.
///
/// Such a row is read as tampered, not as an error: one damaged row must not stop the host that
/// keeps every other account (an error here failed the whole registry's load), nor be used. It
/// keeps what locates it (id, DID, the handle unverified, the PDS), so that it can be listed,
/// removed or logged in again like any row whose seal fails; its secrets are never opened and
/// `blueskyd store reseal` never seals it.
package struct UnreadableRow: Error, Sendable, Equatable {
    /// What could not be read, for `blueskyd store reseal --dry-run` and the journal.
    package let reason: String

    package init(_ reason: String) { self.reason = reason }
}

/// A row as a store parsed it: the record, or what stood in the way of reading it whole.
package enum ParsedRow: Sendable {
    case readable(AccountRecord)
    case unreadable(AccountRecord, UnreadableRow)

    /// The record of a row read whole, or the stand-in of one that was not.
    package var record: AccountRecord {
        switch self {
        case .readable(let record), .unreadable(let record, _): record
        }
    }

    /// The columns every row has (the schema makes them NOT NULL), taken as they are, and the
    /// rest read by `parse`; a value `parse` cannot read makes the row a tampered stand-in.
    package static func parse(id: UUID, did: String, handle: String?, pds: String, createdAt: Date,
                              secretsVersion: Int64, _ parse: () throws -> AccountRecord) throws -> ParsedRow {
        do {
            return .readable(try parse())
        } catch let damage as UnreadableRow {
            let standIn = AccountRecord(id: id, did: did, handle: handle, handleVerified: false, pds: pds,
                                        authKind: .appPassword, isDefault: false, createdAt: createdAt,
                                        secretsVersion: secretsVersion)
            return .unreadable(standIn.markedAltered(.tampered), damage)
        }
    }

    /// The record a store hands back, given what the row's seal says of a readable record. A
    /// stand-in is tampered whatever its seal says: the seal was taken over values the stand-in
    /// does not have.
    package func verified(_ check: (AccountRecord) -> MetadataSealCheck) -> AccountRecord {
        switch self {
        case .readable(let record): record.verified(by: check(record))
        case .unreadable(let standIn, _): standIn
        }
    }
}
