import AccountStoreCore

/// Makes equal strings share one storage. Accounts loaded from the store each get their own
/// copy of strings most of them have in common (the PDS URL, the authorization server's
/// endpoints, the scope, a failure reason): at 100,000 accounts that is tens of megabytes.
struct StringInterner {
    private var table: [String: String] = [:]

    mutating func intern(_ string: String) -> String {
        if let shared = table[string] { return shared }
        table[string] = string
        return string
    }

    mutating func intern(_ string: String?) -> String? { string.map { intern($0) } }

    /// The record with its commonly shared strings interned.
    mutating func intern(_ record: AccountRecord) -> AccountRecord {
        var record = record
        record.pds = intern(record.pds)
        record.stateReason = intern(record.stateReason)
        if var oauth = record.oauth {
            oauth.issuer = intern(oauth.issuer)
            oauth.tokenEndpoint = intern(oauth.tokenEndpoint)
            oauth.revocationEndpoint = intern(oauth.revocationEndpoint)
            oauth.scope = intern(oauth.scope)
            oauth.clientID = intern(oauth.clientID)
            oauth.clientKeyID = intern(oauth.clientKeyID)
            record.oauth = oauth
        }
        return record
    }
}
