import AccountStoreCore
import Foundation
import JSONRPC
import OAuth2Client
#if canImport(Glibc)
import Glibc
#endif

/// `blueskyd store import --check`: each restored session tried once against its server,
/// through the daemon's own session code, after the import.
///
/// What an old export risks is a refresh token spent since it was written, and only a refresh
/// tries one (an access token may still be accepted for hours after its session ended). So a
/// session with a refresh token is refreshed: the rotated tokens are saved before anything
/// uses them, as the daemon saves them, and a server's refusal marks the account as needing a
/// login as the daemon would. A session without one (an OAuth 2.0 server's access-only
/// grant) is tried with a read of the person's profile.
struct ImportCheck {
    enum Outcome: String, Sendable {
        case live
        /// The server refused the restored session: spent since the export, or revoked.
        case needsLogin = "needs-login"
        /// No answer that settles it (the server unreachable, a 5xx, a timeout): try later.
        case unreachable
        /// Nothing could be tried: an access-only session at a server without a profile endpoint.
        case unchecked
    }

    struct Line: Sendable {
        var id: UUID
        var did: String
        var handle: String?
        var kind: AuthKind
        var outcome: Outcome
        var reason: String?
    }

    /// Sessions tried at once: a restore of many accounts does not storm one server.
    static let concurrency = 4

    let core: DaemonCore
    /// The DIDs to try (a merge's accounts whose session came from the export); nil: all.
    let only: Set<String>?

    func run(progress: Bool) async -> [Line] {
        var sessions: [AccountSession] = []
        for session in core.accounts.registry.allSessions {
            let record = await session.record
            if only?.contains(record.did) ?? true { sessions.append(session) }
        }
        var lines: [Line] = []
        lines.reserveCapacity(sessions.count)
        let shown = CopyProgress(total: sessions.count, shown: progress && !sessions.isEmpty, verb: "checked")
        await withTaskGroup(of: Line.self) { group in
            var next = sessions.makeIterator()
            for _ in 0..<Self.concurrency {
                guard let session = next.next() else { break }
                group.addTask { await Self.check(session) }
            }
            while let line = await group.next() {
                lines.append(line)
                shown.show(lines.count)
                if let session = next.next() { group.addTask { await Self.check(session) } }
            }
        }
        shown.finish()
        return lines.sorted { ($0.handle ?? $0.did, $0.did) < ($1.handle ?? $1.did, $1.did) }
    }

    private static func check(_ session: AccountSession) async -> Line {
        let record = await session.record
        var line = Line(id: record.id, did: record.did, handle: record.handleVerified ? record.handle : nil,
                        kind: record.authKind, outcome: .live, reason: nil)
        if record.state == .needsLogin {
            (line.outcome, line.reason) = (.needsLogin, record.stateReason ?? "it needed a login when it was exported")
            return line
        }
        do {
            if record.oauth?.clientKind == .oauth2AccessOnly {
                if try await session.fetchOAuth2Profile() == nil {
                    (line.outcome, line.reason) = (.unchecked, "the server has no profile endpoint and issued no refresh token")
                }
            } else {
                try await session.refresh(force: true)
            }
        } catch let error as DaemonError {
            if case .needsLogin(_, let reason) = error {
                (line.outcome, line.reason) = (.needsLogin, reason)
            } else if case .upstreamUnavailable(let reason, _) = error {
                // Without "the next try is in …": this process ends now; the daemon's schedule decides.
                (line.outcome, line.reason) = (.unreachable, reason)
            } else {
                (line.outcome, line.reason) = (.unreachable, error.description)
            }
        } catch OAuth2ProfileReader.Failure.unauthorized {
            let reason = await session.record.stateReason ?? "the server refused the access token"
            (line.outcome, line.reason) = (.needsLogin, reason)
        } catch {
            (line.outcome, line.reason) = (.unreachable, String(describing: error))
        }
        return line
    }

    /// The report's lines: counts, then each account that is not live (every account when
    /// there are few).
    static func summary(_ lines: [Line]) -> String {
        guard !lines.isEmpty else {
            return "Checked no session: the import restored none (a merge kept the store's own session for every account)."
        }
        var counts: [Outcome: Int] = [:]
        for line in lines { counts[line.outcome, default: 0] += 1 }
        let order: [Outcome] = [.live, .needsLogin, .unreachable, .unchecked]
        var text = "Checked \(lines.count) session\(lines.count == 1 ? "" : "s"): "
            + order.compactMap { outcome in counts[outcome].map { "\($0) \(outcome.rawValue)" } }.joined(separator: ", ") + "."
        for line in lines where line.outcome != .live || lines.count <= 100 {
            // A reason may quote a server's words, and a terminal must not take them as commands.
            text += "\n  \(line.outcome.rawValue.padding(toLength: 12, withPad: " ", startingAt: 0)) "
                + StoreReseal.visible(line.handle.map { "@" + $0 } ?? line.did) + " (\(line.kind.rawValue))"
                + (line.reason.map { ": " + StoreReseal.visible($0) } ?? "")
        }
        if counts[.needsLogin] != nil {
            text += "\n  An account that needs a login: bskyctl login again (its session was spent or revoked since the export)."
        }
        if counts[.unreachable] != nil {
            text += "\n  An unreachable account keeps its session; the daemon tries it again on its schedule."
        }
        return text
    }

    static func json(_ lines: [Line]) -> JSONValue {
        .array(lines.map { line in
            var object: [String: JSONValue] = [
                "account": .string(line.id.uuidString.lowercased()), "did": .string(line.did),
                "auth": .string(line.kind.rawValue), "outcome": .string(line.outcome.rawValue),
            ]
            object["handle"] = line.handle.map(JSONValue.string)
            object["reason"] = line.reason.map(JSONValue.string)
            return .object(object)
        })
    }
}
