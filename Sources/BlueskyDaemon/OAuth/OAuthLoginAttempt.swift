import ATOAuth
import Foundation
import Synchronization

/// One login in progress: what the callback needs, its listener, and its outcome for waiters.
final class OAuthLoginAttempt: Sendable {
    /// Which protocol the login speaks.
    enum Flow: Sendable {
        /// atproto OAuth: the authorization server's endpoints and the client this login
        /// presents (its session keeps it).
        case atproto(AuthorizationServerEndpoints, OAuthLoginClient)
        /// Another OAuth 2.0 server: the authorization request and what the account will keep.
        case oauth2(OAuth2LoginPlan)
    }

    typealias OAuthLoginClient = OAuthClientIdentity.LoginClient

    let id: String
    let state: String
    let flow: Flow
    /// The DID the login named (handle or DID, or the account being upgraded); nil from a URL.
    let expectedDID: String?
    let makeDefault: Bool
    /// The nonce cache's key until the DID is known.
    var nonceScope: String { "login:" + id }
    let startedAt: Date
    /// Nil when the redirect goes to a web page and the user pastes the final address.
    let listener: LoopbackCallbackListener?
    /// Runs once, when the login ends whichever way (it releases the client key it reserved).
    private let onEnd: @Sendable () -> Void

    private struct State {
        var outcome: Result<UUID, OAuthLoginFailure>?
        var finishing = false
        var waiters: [UUID: CheckedContinuation<Result<UUID, OAuthLoginFailure>?, Never>] = [:]
        /// Waiters whose time ran out before they were registered (the timer won the race).
        var expired: Set<UUID> = []
    }
    private let status = Mutex(State())

    init(id: String, state: String, flow: Flow,
         expectedDID: String?, makeDefault: Bool, startedAt: Date, listener: LoopbackCallbackListener?,
         onEnd: @escaping @Sendable () -> Void = {}) {
        self.id = id
        self.state = state
        self.flow = flow
        self.expectedDID = expectedDID
        self.makeDefault = makeDefault
        self.startedAt = startedAt
        self.listener = listener
        self.onEnd = onEnd
    }

    /// The outcome, if the login has ended.
    var outcome: Result<UUID, OAuthLoginFailure>? { status.withLock { $0.outcome } }

    /// Claims the right to finish the login (one callback or paste, once); false if taken.
    func claim() -> Bool {
        status.withLock { state in
            guard state.outcome == nil, !state.finishing else { return false }
            state.finishing = true
            return true
        }
    }

    /// Ends the login (the first outcome wins) and wakes every waiter.
    func finish(_ outcome: Result<UUID, OAuthLoginFailure>) {
        let ended = status.withLock { state -> [CheckedContinuation<Result<UUID, OAuthLoginFailure>?, Never>]? in
            guard state.outcome == nil else { return nil }
            state.outcome = outcome
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        guard let waiters = ended else { return }
        onEnd()
        for waiter in waiters { waiter.resume(returning: outcome) }
    }

    /// Waits for the outcome; nil when `timeout` passes first.
    func wait(timeout: Duration) async -> Result<UUID, OAuthLoginFailure>? {
        let token = UUID()
        let timer = Task { [weak self] in
            try? await Task.sleep(for: timeout)
            self?.resumeWaiter(token, with: nil)
        }
        defer { timer.cancel() }
        return await withCheckedContinuation { continuation in
            let ready = status.withLock { state -> Result<UUID, OAuthLoginFailure>?? in
                if let outcome = state.outcome { return .some(outcome) }
                if state.expired.remove(token) != nil { return .some(nil) }
                state.waiters[token] = continuation
                return .none
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }

    private func resumeWaiter(_ token: UUID, with value: Result<UUID, OAuthLoginFailure>?) {
        let waiter = status.withLock { state in
            guard let waiter = state.waiters.removeValue(forKey: token) else {
                if state.outcome == nil { state.expired.insert(token) }
                return nil as CheckedContinuation<Result<UUID, OAuthLoginFailure>?, Never>?
            }
            return waiter
        }
        waiter?.resume(returning: value)
    }
}
