import Foundation
import Synchronization

/// Where a shaped answer is served: one XRPC method of the PDS, one OAuth endpoint (of either
/// authorization server), the PLC directory, or a handle's `/.well-known/atproto-did`.
public enum AnswerTarget: Hashable, Sendable {
    case xrpc(String)
    case oauth(OAuthEndpoint)
    case plc
    case handleWellKnown
    /// An endpoint of the Mastodon-compatible instance.
    case mastodon(MastodonEndpoint)
    /// An endpoint of the generic OAuth 2.0 server.
    case genericOAuth(GenericOAuthEndpoint)
}

/// How an answer misbehaves on the wire, after the server has acted on the request (a refresh
/// rotated the tokens, a session was created): what slow and broken servers and the proxies in
/// front of them do.
public enum AnswerShape: Sendable, Equatable {
    /// The head (with the whole body's `Content-Length`) and half the body are sent at once;
    /// then nothing more for this long, and the connection closes.
    case stallAfterHalfBody(Duration)
    /// The whole answer is sent only after this long.
    case delayed(Duration)
}

/// The shapes tests asked for: the next `count` answers at a target get one.
final class AnswerShaper: Sendable {
    private struct Pending {
        var shape: AnswerShape
        var remaining: Int
    }

    private let pending = Mutex<[AnswerTarget: Pending]>([:])
    /// When each target last served a shaped answer: the start of the exchange a deadline covers.
    private let served = Mutex<[AnswerTarget: ContinuousClock.Instant]>([:])

    func set(_ shape: AnswerShape, for target: AnswerTarget, count: Int) {
        pending.withLock { $0[target] = count > 0 ? Pending(shape: shape, remaining: count) : nil }
    }

    /// Takes the shape of the next answer at `target`, if any.
    func take(_ target: AnswerTarget) -> AnswerShape? {
        pending.withLock { pending in
            guard var entry = pending[target] else { return nil }
            entry.remaining -= 1
            pending[target] = entry.remaining > 0 ? entry : nil
            served.withLock { $0[target] = .now }
            return entry.shape
        }
    }

    func lastServed(_ target: AnswerTarget) -> ContinuousClock.Instant? { served.withLock { $0[target] } }

    func remaining(_ target: AnswerTarget) -> Int { pending.withLock { $0[target]?.remaining ?? 0 } }

    func reset() {
        pending.withLock { $0 = [:] }
        served.withLock { $0 = [:] }
    }
}

extension Testbed {
    /// The next `count` answers at `target` take `shape` (`count` 0 clears it). The server acts
    /// on each request as usual; only its answer is slow or never completes.
    public func shapeAnswers(at target: AnswerTarget, _ shape: AnswerShape, count: Int) {
        context.shapes.set(shape, for: target, count: count)
    }

    /// When the last shaped answer at `target` began to be served (the request had arrived and
    /// been acted on), by this process's `ContinuousClock`; nil if none was.
    public func lastShapedAnswerServed(at target: AnswerTarget) -> ContinuousClock.Instant? {
        context.shapes.lastServed(target)
    }

    /// How many shaped answers at `target` are still to be served.
    public func pendingShapedAnswers(at target: AnswerTarget) -> Int {
        context.shapes.remaining(target)
    }
}

extension Router {
    /// The target a request is served at, for `AnswerShaper`.
    func answerTarget(of request: TestbedRequest) -> AnswerTarget? {
        let host = request.host
        if host == context.pdsHost || host == context.pdsAliasHost {
            guard request.path.hasPrefix("/xrpc/") else { return nil }
            return .xrpc(String(request.path.dropFirst("/xrpc/".count)))
        }
        if host == context.plcHost { return .plc }
        if host == mastodon.host { return MastodonEndpoint(method: request.method, path: request.path).map(AnswerTarget.mastodon) }
        if host == genericOAuth.store.host {
            return GenericOAuthEndpoint(method: request.method, path: request.path).map(AnswerTarget.genericOAuth)
        }
        if host == authorizationServer.state.host || host == rogueAuthorizationServer.state.host {
            return OAuthEndpoint(path: request.path).map(AnswerTarget.oauth)
        }
        if host.hasSuffix("." + context.domain), request.path == "/.well-known/atproto-did" { return .handleWellKnown }
        return nil
    }
}

extension OAuthEndpoint {
    /// The endpoint an authorization server serves at `path`.
    init?(path: String) {
        switch path {
        case "/.well-known/oauth-authorization-server": self = .metadata
        case "/oauth/par": self = .pushedAuthorization
        case "/oauth/authorize": self = .authorize
        case "/oauth/token": self = .token
        case "/oauth/revoke": self = .revocation
        default: return nil
        }
    }
}
