import FoundationEssentials

/// The `bskyctl accounts` table: aligned columns, one row per account, and the state reason
/// on an indented line under any account that is not active.
public enum AccountTable {
    public static let headers = ["", "HANDLE", "NAME", "DID", "AUTH", "STATE", "ACCESS EXPIRES", "LAST REFRESH", "ID"]

    /// What `bskyctl accounts` prints when there are none.
    public static let emptyMessage = "No accounts. Add one with: bskyctl login <handle>"

    /// The table's lines (no trailing newline), or the empty message.
    public static func render(_ accounts: [AccountSummary], now: Date) -> [String] {
        guard !accounts.isEmpty else { return [emptyMessage] }
        let rows = accounts.map { cells(for: $0, now: now) }
        let widths = headers.indices.map { column in
            ([headers[column]] + rows.map { $0[column] }).map(\.count).max() ?? 0
        }
        var lines = [line(headers, widths: widths)]
        for (account, row) in zip(accounts, rows) {
            lines.append(line(row, widths: widths))
            if let note = stateNote(for: account) { lines.append("    " + note) }
            if let note = sessionNote(for: account, now: now) { lines.append("    " + note) }
        }
        return lines
    }

    /// The cells of one account's row, in `headers` order.
    public static func cells(for account: AccountSummary, now: Date) -> [String] {
        [
            account.isDefault ? "*" : "",
            account.displayHandle,
            account.displayName.map(Self.cellText) ?? "-",
            account.did,
            account.auth,
            account.state,
            account.accessExpiresAt.map { RelativeTime.expiry($0, now: now) } ?? "-",
            account.lastRefreshAt.map { RelativeTime.past($0, now: now) } ?? "never",
            account.id,
        ]
    }

    /// The line under a row that is not active: why, and for needs-login what to run.
    public static func stateNote(for account: AccountSummary) -> String? {
        let reason = account.stateReason?.singleLine
        switch account.state {
        case "active":
            return nil
        case "needs-login":
            let why = reason.map { ": \($0)" } ?? ""
            return "needs login\(why); run: \(account.loginCommand)"
        default:
            return reason.map { "\(account.state): \($0)" }
        }
    }

    /// Under an OAuth account of a public client: when its session ends (it cannot be
    /// extended; log in again before then), flagged in the last 48 hours.
    public static func sessionNote(for account: AccountSummary, now: Date) -> String? {
        guard let end = account.sessionEndsAt, account.state != "needs-login" else { return nil }
        let remaining = end.timeIntervalSince(now)
        guard remaining > 0 else { return "oauth session ended; run: \(account.loginCommand)" }
        let when = "oauth session ends " + RelativeTime.expiry(end, now: now)
        return remaining <= 48 * 3600 ? "\(when): log in again soon; run: \(account.loginCommand)" : when
    }

    /// A display name fit for one cell: one line, at most 32 characters.
    static func cellText(_ name: String) -> String {
        let flat = name.singleLine
        return flat.count <= 32 ? flat : String(flat.prefix(31)) + "…"
    }

    private static func line(_ cells: [String], widths: [Int]) -> String {
        let padded = zip(cells, widths).map { cell, width in
            cell + String(repeating: " ", count: max(0, width - cell.count))
        }
        // Trailing spaces help nobody and upset diff-based tests.
        var text = padded.joined(separator: "  ")
        while text.last == " " { text.removeLast() }
        return text
    }
}
