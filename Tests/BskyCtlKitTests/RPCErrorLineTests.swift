import JSONRPC
import Testing
@testable import BskyCtlKit

/// bskyctl prints what the daemon sent: its message, then only what a terminal user needs
/// besides; the exit status comes from the catalogue.
@Suite("bskyctl's line and exit status for each daemon error")
struct RPCErrorLineTests {
    /// The error as the daemon builds it from the catalogue, every value filled in.
    static func daemonError(_ name: DaemonErrorName) -> RPCError {
        var values: [DaemonErrorName.Field: JSONValue] = [:]
        for field in name.fields {
            values[field] = field == .retryAfter || field == .limit ? .number(42) : .string("sample-\(field.rawValue)")
        }
        return RPCError(name, values)
    }

    /// The statuses scripts rely on; every other name exits 1.
    static let statuses: [DaemonErrorName: BskyCtlKit.ExitStatus] = [
        .permissionDenied: .permissionDenied, .policyDenied: .permissionDenied, .shuttingDown: .daemonUnavailable, .invalidParams: .usage,
    ]

    @Test("the line holds the daemon's message; the exit status is the catalogue's", arguments: DaemonErrorName.allCases)
    func line(name: DaemonErrorName) {
        let error = Self.daemonError(name)
        for context in [RequestContext(), RequestContext(account: "alice.test"), RequestContext(identifier: "bob.test")] {
            let failure = CtlFailure.from(error, context: context)
            #expect(failure.message.hasPrefix(error.message), "\(failure.message)")
            #expect(failure.status == Self.statuses[name, default: BskyCtlKit.ExitStatus.requestFailed])
        }
    }

    @Test("a name this bskyctl does not know: the daemon's message alone, exit 1")
    func unknownName() {
        let error = RPCError(code: -32099, name: "SomethingNew", message: "something new went wrong", extra: ["reason": "x"])
        #expect(CtlFailure.from(error) == CtlFailure("something new went wrong", status: .requestFailed))
    }

    @Test("hints name the command to run next, with what the user typed")
    func hints() {
        let needsLogin = RPCError(.needsLogin, [.account: "0b9d66f0-0000-4000-8000-000000000000", .reason: "Token has been revoked"])
        #expect(CtlFailure.from(needsLogin, context: RequestContext(account: "alice.test")).message
                == "account 0b9d66f0-0000-4000-8000-000000000000 needs a new login: Token has been revoked; "
                + "run: bskyctl login alice.test (add --app-password for an app-password account)")

        let waiting = RPCError(.upstreamUnavailable, [.reason: "HTTP 503", .retryAfter: 30])
        #expect(CtlFailure.from(waiting, context: RequestContext(account: "alice.test")).message
                == "the server is unavailable: HTTP 503; the next try is in 30 s; bskyctl refresh --force tries now")

        let login = CtlFailure.from(RPCError(.upstreamUnavailable, [.reason: "HTTP 503"]), context: RequestContext(identifier: "bob.test"))
        #expect(login.message.hasSuffix("nothing was changed, try again later") && !login.message.contains("the account is kept"))

        // A write whose answer was lost: the daemon's words stand, and nothing invites sending it again.
        let lost = "the connection to https://pds.test/xrpc/com.atproto.repo.createRecord closed after the request was sent "
            + "and before any answer; the server may have received it, so it was not sent again"
        let write = CtlFailure.from(RPCError(.upstreamUnavailable, [.reason: .string(lost)]), context: RequestContext(account: "alice.test"))
        #expect(write.message == "the server is unavailable: \(lost); the account is kept")

        let exists = RPCError(.accountExists, [.account: "0b9d66f0-0000-4000-8000-000000000000"])
        #expect(CtlFailure.from(exists).message.hasSuffix("remove it first with: bskyctl logout 0b9d66f0-0000-4000-8000-000000000000"))

        #expect(CtlFailure.from(.permissionDenied).message == RPCError.permissionDenied.message)
    }
}
