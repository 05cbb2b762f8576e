import BlueskyStore
import Foundation
import JSONRPC

/// The events one change of an account's record stands for, in the order they are published.
struct AccountChange: Sendable {
    var kind: EventKind
    var fields: [String: JSONValue] = [:]

    /// - Parameters:
    ///   - newSession: the change is a new login replacing the session (its own
    ///     `login.completed` says so: no `refreshed` or `recovered` for it).
    ///   - retryAt: when a retrying account tries again.
    static func between(_ old: AccountRecord, _ new: AccountRecord, newSession: Bool, retryAt: Date?) -> [AccountChange] {
        var changes: [AccountChange] = []
        if new.pds != old.pds {
            changes.append(.init(kind: .accountMoved, fields: ["oldPDS": .string(old.pds), "newPDS": .string(new.pds)]))
        }
        if new.handle != old.handle || new.handleVerified != old.handleVerified {
            changes.append(.init(kind: .accountHandleChanged, fields: [
                "oldHandle": old.handle.map(JSONValue.string) ?? .null,
                "handle": new.handle.map(JSONValue.string) ?? .null, "verified": .bool(new.handleVerified),
            ]))
        }
        if new.isDefault, !old.isDefault { changes.append(.init(kind: .accountDefaultChanged)) }
        if !AccountProfile.sameContent(new.profile, old.profile) {
            changes.append(.init(kind: .accountProfileUpdated, fields: ["profile": ProfileView.json(new.profile)]))
        }
        switch new.state {
        case .needsLogin where old.state != .needsLogin:
            changes.append(.init(kind: .accountNeedsLogin, fields: ["reason": reason(new)]))
        case .retrying where old.state != .retrying || old.stateReason != new.stateReason:
            changes.append(.init(kind: .accountRetrying, fields: ["reason": reason(new), "retryAt": AccountView.timestamp(retryAt)]))
        case .active where !newSession:
            if new.lastRefreshAt != old.lastRefreshAt {
                changes.append(.init(kind: .accountRefreshed))
            } else if old.state != .active {
                changes.append(.init(kind: .accountRecovered))
            }
        default:
            break
        }
        return changes
    }

    private static func reason(_ record: AccountRecord) -> JSONValue {
        record.stateReason.map(JSONValue.string) ?? .null
    }
}

extension AccountRecord {
    var eventKeys: PublishedEvent.AccountKeys {
        PublishedEvent.AccountKeys(id: id, did: did, handle: handleVerified ? handle : nil)
    }
}

extension AccountSession {
    /// The one place a change of the record fans out from: the registry's indexes and counts
    /// follow it, then its events are published.
    func recordDidChange(from old: AccountRecord) {
        guard environment.registry.recordChanged(self, from: old, to: record) else { return }
        let changes = AccountChange.between(old, record, newSession: replacingSession, retryAt: retryAt)
        guard !changes.isEmpty else { return }
        let view = view()
        for change in changes {
            environment.events.publish(change.kind, account: record.eventKeys, view: view, fields: change.fields)
        }
    }

    /// Publishes an event about this account that no record change carries.
    func publish(_ kind: EventKind, fields: [String: JSONValue] = [:]) {
        environment.events.publish(kind, account: record.eventKeys, view: view(), fields: fields)
    }
}
