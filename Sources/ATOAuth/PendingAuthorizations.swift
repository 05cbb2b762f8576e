import DPoP
import Foundation

/// What the client must remember between sending the user to the authorization server and
/// receiving the callback.
public struct PendingAuthorization: Sendable {
    public var state: String
    /// The issuer the request went to: the callback's `iss` must equal it.
    public var issuer: String
    public var pkce: PKCE
    public var redirectURI: String
    /// The DPoP key used for PAR, which the token exchange must use too.
    public var dpopKey: DPoPKey
    /// The account being logged in to, when known (re-login): the token's `sub` must match.
    public var expectedDID: String?
    public var createdAt: Date

    public init(state: String, issuer: String, pkce: PKCE, redirectURI: String, dpopKey: DPoPKey,
                expectedDID: String? = nil, createdAt: Date = Date()) {
        self.state = state
        self.issuer = issuer
        self.pkce = pkce
        self.redirectURI = redirectURI
        self.dpopKey = dpopKey
        self.expectedDID = expectedDID
        self.createdAt = createdAt
    }
}

/// The logins in progress, by `state`; each state is accepted once.
public final class PendingAuthorizations: Sendable {
    /// How long a user may take to log in and approve.
    public let lifetime: TimeInterval
    /// How many used states are remembered to tell a replayed callback from a forged one.
    public let usedStateMemory: Int

    private struct Storage {
        var pending: [String: PendingAuthorization] = [:]
        var used: [String] = []
        var usedSet: Set<String> = []
    }

    private let storage = LockedBox(Storage())

    public init(lifetime: TimeInterval = 30 * 60, usedStateMemory: Int = 1024) {
        self.lifetime = lifetime
        self.usedStateMemory = usedStateMemory
    }

    /// Remembers a login in progress, under its state.
    public func insert(_ authorization: PendingAuthorization) {
        storage.withLock { $0.pending[authorization.state] = authorization }
    }

    /// How many logins are in progress.
    public var count: Int { storage.withLock { $0.pending.count } }

    /// Checks `callback` and, when it is good, consumes its state and returns the login it
    /// completes with the code to exchange. In order: the state is present, known, unused and
    /// fresh; `iss` is present and equals the request's issuer; then an `error` is reported as
    /// such; otherwise there must be a code. A known state is consumed by any answer to it,
    /// error or not, so it can never be used twice.
    public func complete(_ callback: AuthorizationCallback, now: Date = Date())
        throws(CallbackError) -> (authorization: PendingAuthorization, code: String)
    {
        guard let state = callback.state, !state.isEmpty else { throw .missingState }
        let outcome: Result<PendingAuthorization, CallbackError> = storage.withLock { storage in
            guard let authorization = storage.pending.removeValue(forKey: state) else {
                return .failure(storage.usedSet.contains(state) ? .stateAlreadyUsed : .unknownState)
            }
            storage.used.append(state)
            storage.usedSet.insert(state)
            if storage.used.count > usedStateMemory { storage.usedSet.remove(storage.used.removeFirst()) }
            return .success(authorization)
        }
        let authorization = try outcome.get()
        guard now.timeIntervalSince(authorization.createdAt) <= lifetime else { throw .expired }
        guard let issuer = callback.issuer else { throw .missingIssuer }
        guard issuer == authorization.issuer else { throw .issuerMismatch(expected: authorization.issuer, actual: issuer) }
        if let error = callback.error { throw .authorizationFailed(error: error, description: callback.errorDescription) }
        guard let code = callback.code, !code.isEmpty else { throw .missingCode }
        return (authorization, code)
    }

    /// Why a state no login is waiting for is refused, without consuming anything: a state
    /// answered before, or one never issued (or forgotten).
    public func verdict(forStrayState state: String) -> CallbackError {
        storage.withLock { $0.usedSet.contains(state) ? .stateAlreadyUsed : .unknownState }
    }

    /// Forgets logins started more than ``lifetime`` ago.
    public func removeExpired(now: Date = Date()) {
        storage.withLock { storage in
            storage.pending = storage.pending.filter { now.timeIntervalSince($0.value.createdAt) <= lifetime }
        }
    }
}

/// A value guarded by a lock.
final class LockedBox<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) { self.value = value }

    func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
