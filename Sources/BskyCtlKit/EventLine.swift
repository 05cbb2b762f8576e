import FoundationEssentials
import JSONRPC

/// How `bskyctl events` prints one notification: a line for people, or its params as JSON.
public enum EventLine {
    /// The params as one line of JSON; a gap notice gets `"kind": "events.gap"`.
    public static func json(method: String, _ params: JSONValue) -> String {
        guard method != "event", case .object(var fields) = params else { return String(decoding: params.encoded(), as: UTF8.self) }
        fields["kind"] = .string(method)
        return String(decoding: JSONValue.object(fields).encoded(), as: UTF8.self)
    }

    /// "2026-11-24T10:00:00Z account.needsLogin alice.example.com: needs a new login: …".
    public static func text(method: String, _ params: JSONValue, now: Date) -> String {
        if method == "events.gap" { return "\(stamp(nil, now)) events.gap: \(gap(params))" }
        let kind = params["kind"]?.stringValue ?? method
        let account = params["account"].map(AccountSummary.init(json:))
        var line = "\(stamp(params["at"]?.stringValue, now)) \(kind)"
        if let account { line += " \(account.handle != "-" ? account.handle : account.did)" }
        let detail = detail(kind, params, account)
        return detail.isEmpty ? line : line + ": " + detail
    }

    private static func stamp(_ at: String?, _ now: Date) -> String {
        at ?? now.formatted(.iso8601)
    }

    private static func gap(_ params: JSONValue) -> String {
        if params["reason"]?.stringValue == "history" {
            return "events since \(number(params["since"])) are no longer kept; run 'bskyctl accounts' to catch up"
        }
        return "missed \(number(params["missed"])) events (this client read too slowly); run 'bskyctl accounts' to catch up"
    }

    private static func detail(_ kind: String, _ params: JSONValue, _ account: AccountSummary?) -> String {
        func text(_ key: String) -> String { params[key]?.stringValue ?? "-" }
        switch kind {
        case "account.added": return "added (\(account?.auth ?? "-"))"
        case "account.removed": return "removed"
        case "account.refreshed":
            return "refreshed" + (account?.accessExpiresAt.map { "; access token valid until \($0.formatted(.iso8601))" } ?? "")
        case "account.retrying": return "will retry at \(text("retryAt")): \(text("reason"))"
        case "account.recovered": return "works again"
        case "account.needsLogin":
            return "needs a new login: \(text("reason"))" + (account.map { " (run '\($0.loginCommand)')" } ?? "")
        case "account.moved": return "moved from \(text("oldPDS")) to \(text("newPDS"))"
        case "account.handleChanged":
            return "handle \(text("oldHandle")) -> \(text("handle"))" + (params["verified"]?.boolValue == true ? " (verified)" : " (unverified)")
        case "account.sessionEndingSoon": return "the OAuth session ends at \(text("sessionEndsAt")); log in again to keep it"
        case "account.profileUpdated": return "profile: \(params["profile"]?["displayName"]?.stringValue ?? "(no display name)")"
        case "account.defaultChanged": return "is now the default account"
        case "account.tampered":
            return "its record has no seal that holds (\(text("seal"))): no token is sent; 'blueskyd store reseal --dry-run' says why"
        case "login.completed": return "logged in (\(text("method")))"
        case "login.failed":
            let who = params["identifier"]?.stringValue.map { " for \($0)" } ?? ""
            return "login\(who) failed: \(text("message"))"
        case "daemon.storeUnavailable": return "the account store cannot be written: \(text("reason"))"
        case "daemon.storeAvailable": return "the account store can be written again"
        case "daemon.stopping": return "blueskyd is stopping"
        default: return ""
        }
    }

    private static func number(_ value: JSONValue?) -> String {
        value?.intValue.map(String.init) ?? "?"
    }
}
