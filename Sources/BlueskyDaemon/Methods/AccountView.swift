import AccountStoreCore
import Foundation
import JSONRPC

/// How an account appears in replies (never with its tokens).
enum AccountView {
    /// - Parameter refreshInterruptedAt: when a refresh whose answer never came was sent (the
    ///   daemon stopped, or the answer was lost), until a refresh succeeds.
    static func json(_ record: AccountRecord, nextRefreshAt: Date?, refreshInterruptedAt: Date? = nil) -> JSONValue {
        var fields: [String: JSONValue] = [
            "id": .string(record.id.uuidString.lowercased()),
            "did": .string(record.did),
            "handle": record.handle.map(JSONValue.string) ?? .null,
            // A row whose seal fails has nothing of its own to show as verified.
            "handleVerified": .bool(record.handleVerified && record.selectorsAreSealed),
            "pds": .string(record.pds),
            "auth": .string(record.authKind.rawValue),
            "state": .string(record.state.rawValue),
            "stateReason": record.stateReason.map(JSONValue.string) ?? .null,
            "isDefault": .bool(record.isDefault),
            "createdAt": timestamp(record.createdAt),
            "lastRefreshAt": timestamp(record.lastRefreshAt),
            "accessExpiresAt": timestamp(record.accessExpiresAt),
            "nextRefreshAt": timestamp(nextRefreshAt),
            "refreshInterruptedAt": timestamp(refreshInterruptedAt),
            "profile": ProfileView.json(record.profile),
        ]
        // Its handle, DID and servers are the row's word only: a login built from them could
        // send a password to whoever rewrote it.
        if record.isAltered { fields["tampered"] = .string(record.alteredCheck.rawValue) }
        if let oauth = record.oauth {
            fields["oauth"] = .object([
                "issuer": .string(oauth.issuer),
                "scope": .string(oauth.scope),
                "clientKind": .string(oauth.clientKind.rawValue),
                "clientID": .string(oauth.clientID),
                "clientKeyID": oauth.clientKeyID.map(JSONValue.string) ?? .null,
                "sessionStartedAt": timestamp(oauth.sessionStartedAt),
                "sessionEndsAt": timestamp(record.sessionEndsAt),
                "sessionEndsSoon": .bool(record.sessionEndsSoon(now: Date())),
            ])
        }
        return .object(fields)
    }

    static func timestamp(_ date: Date?) -> JSONValue {
        guard let date else { return .null }
        return .string(date.formatted(.iso8601))
    }
}

/// How a cached profile appears: `{displayName, avatar, description, fetchedAt}`, or null.
enum ProfileView {
    static func json(_ profile: AccountProfile?) -> JSONValue {
        guard let profile else { return .null }
        return [
            "displayName": profile.displayName.map(JSONValue.string) ?? .null,
            "avatar": profile.avatar.map(JSONValue.string) ?? .null,
            "description": profile.description.map(JSONValue.string) ?? .null,
            "fetchedAt": AccountView.timestamp(profile.fetchedAt),
        ]
    }
}

extension AccountSession {
    /// The account as replies and events show it: `nextRefreshAt` is the date the scheduler
    /// holds, not one worked out again.
    func view() -> JSONValue {
        AccountView.json(state.record, nextRefreshAt: state.due, refreshInterruptedAt: state.trouble.interrupted?.at)
    }
}
