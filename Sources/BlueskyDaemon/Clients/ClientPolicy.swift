import ATPermissions
import Foundation

/// What one client may do: which accounts it may use and which calls it may make, in atproto's
/// permission syntax. It only narrows: a call it allows is still made with the account's own
/// session, whose OAuth scope the server enforces.
///
/// The main sockets serve unrestricted clients (no policy); a `[[client]]` socket and a gateway
/// token from `bskyctl exec` carry one.
struct ClientPolicy: Sendable, Hashable {
    /// The `[[client]]` name, or `exec:<program>` for a token.
    var name: String
    /// The calls allowed; nil allows every call (the session's scope still applies).
    var grant: PermissionGrant?
    /// The accounts allowed (UUIDs, DIDs or handles as written); nil allows every account.
    var accounts: [String]?

    /// A token's policy that allows everything (the token file's).
    static let unrestricted = ClientPolicy(name: "token-file", grant: nil, accounts: nil)

    /// The name in metrics: a `[[client]]`'s, or `exec` for every token (program names would
    /// make the label set grow without bound).
    var metricsName: String { name.hasPrefix("exec:") ? "exec" : name }

    var policyRule: String { "policy = \"\(grant?.description ?? "")\"" }
    var accountsRule: String { "accounts = [" + (accounts ?? []).map { "\"\($0)\"" }.joined(separator: ", ") + "]" }

    /// The account `reference` names, if this client may use it; the one account the policy
    /// fixes when `reference` is nil and the policy names only one.
    func account(_ reference: String?, in registry: AccountRegistry) throws(DaemonError) -> AccountSession {
        guard let accounts else { return try registry.session(reference) }
        let session = try registry.session(reference ?? (accounts.count == 1 ? accounts[0] : nil))
        guard allows(session, in: registry) else {
            throw .policyDenied(client: name, rule: accountsRule, permission: "account \(reference ?? session.id.uuidString.lowercased())")
        }
        return session
    }

    /// Whether `session` is one of the accounts allowed.
    func allows(_ session: AccountSession, in registry: AccountRegistry) -> Bool {
        guard let accounts else { return true }
        // Names are resolved now: a handle follows its account, and an account added later
        // under a listed DID is allowed.
        return accounts.contains { (try? registry.session($0))?.id == session.id }
    }

    /// Holds `call` to this policy, as both fronts do before making it: the account it may use
    /// (fixed when the call names none and the policy names one) and the permissions it needs.
    /// Returns that account, which the call now names.
    func admit(_ call: inout XRPCCall, uploadType: String? = nil, in registry: AccountRegistry) throws(DaemonError) -> UUID {
        let session = try account(call.account, in: registry)
        try check(call, uploadType: uploadType)
        call.account = session.id.uuidString
        if let grant, call.nsid == "com.atproto.server.getSession", !grant.grants(.account(attribute: "email", action: .read)) {
            call.hidesEmail = true
        }
        return session.id
    }

    /// The same for a call to an OAuth 2.0 server's account: its method and path.
    func admit(_ call: inout HTTPCall, in registry: AccountRegistry) throws(DaemonError) -> UUID {
        let session = try account(call.account, in: registry)
        try check(http: call)
        call.account = session.id.uuidString
        return session.id
    }

    /// Refuses an OAuth 2.0 server's call the grant does not cover. A grant of some methods
    /// only is judged on the method the server will act on: a request that names another (or
    /// whose body cannot be read to know) needs them all.
    func check(http call: HTTPCall) throws(DaemonError) {
        guard let grant else { return }
        if !grant.grants(call.need) {
            throw .policyDenied(client: name, rule: policyRule, permission: call.need.description)
        }
        guard !grant.grants(.http(method: "*", path: call.path)) else { return }
        if call.bodyIsStreamed {
            throw .policyDenied(client: name, rule: policyRule,
                                permission: "http:*:\(call.path) (a streamed body, chunked or past 1 MiB, cannot be read for a method override)")
        }
        if let override = call.methodOverride {
            throw .policyDenied(client: name, rule: policyRule, permission: "http:*:\(call.path) (the request overrides its method: \(override))")
        }
    }

    /// Refuses `call` unless the grant covers everything it needs.
    func check(_ call: XRPCCall, uploadType: String? = nil) throws(DaemonError) {
        guard let grant else { return }
        let shape = CallShape(call, uploadType: uploadType)
        if let missing = grant.firstMissing(shape.needs) {
            throw .policyDenied(client: name, rule: policyRule, permission: missing.description)
        }
    }

    /// Refuses a JSON-RPC method that is not a call: restricted clients read, they do not
    /// manage accounts or the daemon.
    func refuseManagement(_ method: String) -> DaemonError {
        .policyDenied(client: name, rule: "[[client]] sockets and gateway tokens make calls, they do not manage blueskyd",
                      permission: method)
    }
}

extension ClientPolicy {
    /// A policy as configuration writes it; the error names the permission that cannot be read.
    static func parse(name: String, policy: String?, accounts: [String]?) throws(PermissionSyntaxError) -> ClientPolicy {
        let grant = try policy.map { text throws(PermissionSyntaxError) in try PermissionGrant(parsing: text) }
        for permission in grant?.permissions ?? [] {
            // Only an authorization server resolves a set (from its Lexicon); a local policy
            // that silently granted nothing for it would only puzzle.
            if case .include(let text) = permission {
                throw PermissionSyntaxError(permission: text, reason: "a permission set (include:) is resolved by an authorization server, not in a local policy; name its permissions")
            }
        }
        return ClientPolicy(name: name, grant: grant, accounts: accounts)
    }
}
