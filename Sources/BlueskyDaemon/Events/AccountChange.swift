import AccountStoreCore
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
        if new.isAltered, !old.isAltered || old.alteredCheck != new.alteredCheck {
            changes.append(.init(kind: .accountTampered, fields: ["seal": .string(new.alteredCheck.rawValue)]))
        }
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
    /// What the store found of an altered record's seal (`tampered` for a record this daemon
    /// marked altered in an earlier run, whose reason is all that was kept).
    var alteredCheck: AccountSealCheck { sealCheck == .holds ? .tampered : sealCheck }

    var eventKeys: PublishedEvent.AccountKeys {
        PublishedEvent.AccountKeys(id: id, did: did, handle: handleVerified && selectorsAreSealed ? handle : nil)
    }
}

extension AccountSession {
    /// The events a change of the record stands for, published with the account as it now is.
    /// The registry's indexes and counts follow first. A session removed meanwhile (a refresh
    /// finishing after a logout) publishes nothing.
    func recordDidChange(from old: AccountRecord, newSession: Bool) {
        guard old != state.record else { return }
        guard environment.registry.recordChanged(self, from: old, to: state.record) else { return }
        let changes = AccountChange.between(old, state.record, newSession: newSession, retryAt: state.retryAt)
        guard !changes.isEmpty else { return }
        let view = view()
        for change in changes {
            environment.events.publish(change.kind, account: state.record.eventKeys, view: view, fields: change.fields)
        }
    }

    /// Publishes an event about this account that no record change carries.
    func publish(_ kind: EventKind, fields: [String: JSONValue] = [:]) {
        environment.events.publish(kind, account: state.record.eventKeys, view: view(), fields: fields)
    }

    /// Logs what a transition meant.
    func log(_ note: AccountLifecycle.Note) {
        switch note {
        case .refreshed(let renamed):
            logger.info("session refreshed", metadata: ["outcome": "refreshed"])
            if let renamed { logger.notice("the server reports a new handle", metadata: ["handle": "\(renamed)"]) }
        case .retrying(let reason, let delay):
            logger.warning("refresh failed, will retry", metadata: [
                "outcome": "retrying", "reason": "\(reason)", "retryInSeconds": "\(Int(delay.rounded(.up)))",
            ])
        case .needsLogin(let reason):
            logger.error("session rejected; the account needs a new login", metadata: ["outcome": "needs-login", "reason": "\(reason)"])
        case .saveRefused(let reason, let delay):
            logger.warning("the store refused the rotated tokens; they are kept in memory and saved again", metadata: [
                "outcome": "save-refused", "reason": "\(reason)", "retryInSeconds": "\(Int(delay.rounded(.up)))",
            ])
        case .adoptedNewerTokens:
            logger.debug("took over newer tokens another host stored", metadata: ["outcome": "adopted"])
        case .savedOverByAnotherHost:
            logger.warning("another host saved newer tokens while this refresh ran (its lease had run out); using those",
                           metadata: ["outcome": "superseded"])
        case .recordAltered:
            // The event (`account.tampered`) says which: a seal that fails, or none of this version.
            logger.error("""
                the account's record has no seal that holds (changed outside blueskyd, or not yet resealed); \
                its tokens are sent nowhere and no handle or default names it
                """,
                         metadata: ["outcome": "record-altered", "seal": "\(state.record.alteredCheck.rawValue)",
                                    "next": "blueskyd store reseal --dry-run; a new login mends it"])
        case .movedAway:
            break
        }
    }
}
