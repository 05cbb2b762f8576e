@testable import BlueskyDaemon
import Foundation
import JSONRPC
import Testing

/// The daemon's own builders (`DaemonError`, `OAuthLoginFailure`, the framing's errors) send
/// each name with the catalogue's code and `data` fields, and a message naming what it is about.
@Suite("The daemon's errors match the catalogue")
struct DaemonErrorCatalogueTests {
    static let account = UUID(uuidString: "0B9D66F0-0000-4000-8000-000000000000")!

    /// The daemon-side builder of each name, with the texts its message must mention. The
    /// switch is exhaustive, so a new name cannot go without a builder tested here.
    static func daemonSide(_ name: DaemonErrorName) -> (error: RPCError, mentions: [String]) {
        switch name {
        case .parseError: (.parseError("the line is not valid JSON"), ["not valid JSON"])
        case .invalidRequest: (.invalidRequest("no method"), ["no method"])
        case .lineTooLong: (.lineTooLong(maxLineBytes: 4096), ["4096", "max_line_bytes"])
        case .emptyBatch: (.emptyBatch, ["empty batch"])
        case .methodNotFound: (DaemonError.methodNotFound("no.such").rpcError, ["no.such"])
        case .invalidParams: (DaemonError.invalidParams("not a handle", field: "account").rpcError, ["not a handle"])
        case .internalError: (DaemonError.internalError("disk on fire").rpcError, ["disk on fire"])
        case .permissionDenied: (.permissionDenied, ["permission denied"])
        case .accountNotFound: (DaemonError.accountNotFound("alice.test").rpcError, ["alice.test"])
        case .noDefaultAccount: (DaemonError.noDefaultAccount.rpcError, ["default account"])
        case .needsLogin:
            (DaemonError.needsLogin(account: account, reason: "Token has been revoked").rpcError,
             ["0b9d66f0-0000-4000-8000-000000000000", "Token has been revoked"])
        case .authFactorTokenRequired:
            (DaemonError.authFactorTokenRequired("A sign-in code has been sent").rpcError, ["A sign-in code has been sent"])
        case .authenticationFailed: (DaemonError.authenticationFailed("Invalid password").rpcError, ["Invalid password"])
        case .identityResolutionFailed: (DaemonError.identityResolutionFailed("no DID").rpcError, ["no DID"])
        case .upstreamUnavailable: (DaemonError.upstreamUnavailable("HTTP 503", retryAfter: 29.2).rpcError, ["HTTP 503", "30 s"])
        case .accountExists: (DaemonError.accountExists(account).rpcError, ["0b9d66f0-0000-4000-8000-000000000000"])
        case .shuttingDown: (DaemonError.shuttingDown.rpcError, ["shutting down"])
        case .notConfidentialClient: (DaemonError.notConfidentialClient.rpcError, ["private_key_jwt"])
        case .alreadySubscribed: (DaemonError.alreadySubscribed.rpcError, ["events.unsubscribe"])
        case .policyDenied:
            (DaemonError.policyDenied(client: "reader", rule: "policy = \"read\"", permission: "repo:app.bsky.feed.post?action=create").rpcError,
             ["reader", "policy = \"read\"", "repo:app.bsky.feed.post?action=create"])
        case .scopeMissing:
            (DaemonError.scopeMissing(account: account, scope: "repo:app.bsky.feed.post?action=delete", reason: "Missing required scope").rpcError,
             ["0b9d66f0-0000-4000-8000-000000000000", "repo:app.bsky.feed.post?action=delete", "--upgrade"])
        case .oauthLoginNotFound: oauth(.loginNotFound("L1"), ["L1"])
        case .oauthInvalidIdentifier: oauth(.invalidIdentifier("n o"), ["'n o'"])
        case .oauthMetadataInvalid: oauth(.metadataInvalid("not https"), ["not https"])
        case .oauthStateUnknown: oauth(.stateUnknown, ["state"])
        case .oauthStateReused: oauth(.stateReused, ["opened twice"])
        case .oauthIssuerMismatch:
            oauth(.issuerMismatch(expected: "https://a.test", actual: "https://b.test"), ["https://a.test", "https://b.test"])
        case .oauthCallbackInvalid: oauth(.callbackInvalid("no code"), ["no code"])
        case .oauthAuthorizationDenied: oauth(.authorizationDenied("access_denied"), ["access_denied"])
        case .oauthSubjectMismatch:
            oauth(.subjectMismatch(expected: "did:plc:a", actual: "did:plc:b"), ["did:plc:a", "did:plc:b"])
        case .oauthTokenResponseInvalid: oauth(.tokenResponseInvalid("not DPoP"), ["not DPoP"])
        case .oauthIssuerNotAuthoritative:
            oauth(.issuerNotAuthoritative(issuer: "https://x.test", expected: "https://y.test"), ["https://x.test", "https://y.test"])
        case .oauthServerRefused: oauth(.serverRefused("invalid_grant"), ["invalid_grant"])
        case .oauthServerUnavailable: oauth(.serverUnavailable("HTTP 502"), ["HTTP 502"])
        case .oauthCallbackListenerUnavailable: oauth(.callbackListenerUnavailable("port 8080 in use"), ["port 8080 in use"])
        case .oauthLoginTimeout: oauth(.timedOut, ["in time"])
        case .oauthLoginCancelled: oauth(.cancelled, ["cancelled"])
        case .oauthLoginExpired: oauth(.expired, ["too long"])
        }
    }

    static func oauth(_ failure: OAuthLoginFailure, _ mentions: [String]) -> (error: RPCError, mentions: [String]) {
        (DaemonError.oauthLogin(failure).rpcError, mentions)
    }

    /// (Each name's code is checked against docs/PROTOCOL.md in ErrorCatalogueDocsTests.)
    @Test("each name: the builder's data fields and message", arguments: DaemonErrorName.allCases)
    func builder(name: DaemonErrorName) {
        let (error, mentions) = Self.daemonSide(name)
        #expect(error.name == name.rawValue)
        #expect(Set(error.data.keys) == Set(name.dataFields.map(\.rawValue) + ["name"]))
        for text in mentions { #expect(error.message.contains(text), "\(error.message) mentions \(text)") }
    }

    @Test("the data scripts read stay as they were: NeedsLogin, UpstreamUnavailable, InvalidParams")
    func dataValues() {
        let needsLogin = DaemonError.needsLogin(account: Self.account, reason: "gone").rpcError
        #expect(needsLogin.data == ["name": "NeedsLogin", "account": "0b9d66f0-0000-4000-8000-000000000000", "reason": "gone"])
        let waiting = DaemonError.upstreamUnavailable("HTTP 503", retryAfter: 29.2).rpcError
        #expect(waiting.data == ["name": "UpstreamUnavailable", "reason": "HTTP 503", "retryAfter": 30])
        #expect(DaemonError.upstreamUnavailable("HTTP 503").rpcError.data == ["name": "UpstreamUnavailable", "reason": "HTTP 503"])
        #expect(DaemonError.invalidParams("bad", field: nil).rpcError.data == ["name": "InvalidParams"])
        let stopping = DaemonError.shuttingDown.rpcError
        #expect(stopping.code == -32009 && stopping.message == "blueskyd is shutting down")
    }
}
