import GRDB

/// The columns an `AccountRecord` is read from, in `databaseSelection`'s order.
enum AccountField: Int, CaseIterable {
    case id, did, handle, handleVerified, pds, authKind, state, stateReason, isDefault
    case createdAt, updatedAt, lastRefreshAt, accessExpiresAt, refreshExpiresAt, refreshStartedAt
    case oauthIssuer, oauthTokenEndpoint, oauthRevocationEndpoint, oauthScope, oauthSessionStartedAt
    case oauthClientKind, oauthClientID, oauthClientKeyID
    case profileDisplayName, profileAvatar, profileDescription, profileFetchedAt
    case secretsVersion, metadataSeal

    var column: Column {
        switch self {
        case .id: AccountColumn.id
        case .did: AccountColumn.did
        case .handle: AccountColumn.handle
        case .handleVerified: AccountColumn.handleVerified
        case .pds: AccountColumn.pds
        case .authKind: AccountColumn.authKind
        case .state: AccountColumn.state
        case .stateReason: AccountColumn.stateReason
        case .isDefault: AccountColumn.isDefault
        case .createdAt: AccountColumn.createdAt
        case .updatedAt: AccountColumn.updatedAt
        case .lastRefreshAt: AccountColumn.lastRefreshAt
        case .accessExpiresAt: AccountColumn.accessExpiresAt
        case .refreshExpiresAt: AccountColumn.refreshExpiresAt
        case .refreshStartedAt: AccountColumn.refreshStartedAt
        case .oauthIssuer: AccountColumn.oauthIssuer
        case .oauthTokenEndpoint: AccountColumn.oauthTokenEndpoint
        case .oauthRevocationEndpoint: AccountColumn.oauthRevocationEndpoint
        case .oauthScope: AccountColumn.oauthScope
        case .oauthSessionStartedAt: AccountColumn.oauthSessionStartedAt
        case .oauthClientKind: AccountColumn.oauthClientKind
        case .oauthClientID: AccountColumn.oauthClientID
        case .oauthClientKeyID: AccountColumn.oauthClientKeyID
        case .profileDisplayName: AccountColumn.profileDisplayName
        case .profileAvatar: AccountColumn.profileAvatar
        case .profileDescription: AccountColumn.profileDescription
        case .profileFetchedAt: AccountColumn.profileFetchedAt
        case .secretsVersion: AccountColumn.secretsVersion
        case .metadataSeal: AccountColumn.metadataSeal
        }
    }
}

/// Where a statement's rows hold each account column, found by name once. Every row of one
/// statement has its columns in the same places; finding some thirty columns by name in each
/// row (a hashed, case-insensitive lookup each) was a sixth of a start's CPU, so the reads of
/// many rows (a start's pages, a copy, an export, a reseal) find them in their first row and
/// read the rest by position.
struct AccountRowLayout {
    private let indexes: [Int?]

    init(_ row: Row) {
        // As GRDB finds a column by name: the first of that name, whatever its case.
        let names = Array(row.columnNames).map { $0.lowercased() }
        indexes = AccountField.allCases.map { names.firstIndex(of: $0.column.name.lowercased()) }
    }

    /// The layout of `row`'s statement: `cached`, once a row of it was read, else found now and kept.
    static func of(_ row: Row, cached: inout AccountRowLayout?) -> AccountRowLayout {
        if let cached { return cached }
        let found = AccountRowLayout(row)
        cached = found
        return found
    }

    /// Where `field` is, or nil when the statement did not select it.
    func index(of field: AccountField) -> Int? { indexes[field.rawValue] }
}

extension Row {
    /// The value of `field` where `layout` found it. Without a layout (a single row, where
    /// finding every column once costs what finding it by name does), and for a column the
    /// statement lacks, it is asked for by name, for GRDB's own answer.
    subscript<Value: DatabaseValueConvertible>(_ field: AccountField, in layout: AccountRowLayout?) -> Value {
        guard let index = layout?.index(of: field) else { return self[field.column] }
        return self[index]
    }

    /// The same for the types SQLite hands over as they are (strings, numbers, blobs): GRDB's
    /// fast path, which reads the statement's column without a `DatabaseValue` in between.
    subscript<Value: DatabaseValueConvertible & StatementColumnConvertible>(_ field: AccountField,
                                                                            in layout: AccountRowLayout?) -> Value {
        guard let index = layout?.index(of: field) else { return self[field.column] }
        return self[index]
    }

    /// A nullable column: nil for NULL. Asked for as `Value`, not `Value?`: GRDB's decoding of an
    /// optional by position, unspecialised across the module boundary, looked up the optional
    /// type's generic metadata at every call (a hashed lookup under a lock): with it, decoding was
    /// 38 % of a 1,000,000-account start.
    subscript<Value: DatabaseValueConvertible & StatementColumnConvertible>(orNil field: AccountField,
                                                                            in layout: AccountRowLayout?) -> Value? {
        guard let index = layout?.index(of: field) else { return self[field.column] }
        return hasNull(atIndex: index) ? nil : self[index] as Value
    }
}
