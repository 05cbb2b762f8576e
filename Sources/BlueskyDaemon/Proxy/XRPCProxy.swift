import BlueskyHTTP
import Foundation
import JSONRPC
import Logging
import XRPC

/// Makes XRPC calls on behalf of local clients, with the account's token, and turns the
/// PDS's answer into the `xrpc.call` result.
struct XRPCProxy: Sendable {
    let registry: AccountRegistry
    let environment: SessionEnvironment
    /// Looks at the account's DID document again (shared, at most once a minute) after the PDS
    /// at the given URL refused a just-refreshed token; true when the account now has another
    /// PDS (the call is then made there, once). Throws `NeedsLogin` when it cannot follow.
    var pdsChanged: @Sendable (AccountSession, URL) async throws(DaemonError) -> Bool = { _, _ in false }
    /// Told when a server refused an account's token and a refresh replaced it (an OAuth 2.0
    /// server's account): its cached profile is fetched again, who the token names being in doubt.
    var tokenRefused: @Sendable (AccountSession) -> Void = { _ in }
    /// The client of calls whose bodies stream (the gateway's large uploads, sync answers);
    /// without one, those are made whole like the others.
    var streaming: OutboundHTTP?

    /// Headers passed back to the client: rate limits and retry hints.
    static let forwardedHeaders: Set<String> = [
        "ratelimit-limit", "ratelimit-remaining", "ratelimit-reset", "ratelimit-policy", "retry-after",
        "content-type", "atproto-content-labelers", "atproto-repo-rev",
    ]

    func call(_ call: XRPCCall, upstream: UpstreamTime? = nil) async throws(DaemonError) -> JSONValue {
        Self.result(of: try await forward(call, upstream: upstream))
    }

    /// The PDS's answer to `call`, made for its account (the gateway passes it on as it is).
    /// - Parameter upstream: collects the time spent in exchanges with the PDS (for metrics).
    func forward(_ call: XRPCCall, upstream: UpstreamTime? = nil) async throws(DaemonError) -> InboundResponse {
        let session = try registry.session(call.account)
        var answer = try await send(call, session: session, upstream: upstream)
        // A token refused right after a refresh, or the reference PDS's answer for an account
        // that migrated away: the DID document may name another PDS, where the call is made once.
        if answer.refusedAfterRefresh || Self.isAccountDeactivated(answer.response),
           try await pdsChanged(session, answer.pds) {
            answer = try await send(call, session: session, upstream: upstream)
        }
        try await checkScope(answer.response, call: call, session: session)
        return call.hidesEmail ? Self.withoutEmail(answer.response) : answer.response
    }

    /// A session description without its email fields; an answer that cannot be read as a JSON
    /// object keeps only its status (what cannot be read whole is not passed on).
    static func withoutEmail(_ response: InboundResponse) -> InboundResponse {
        var response = response
        guard case .object(var fields)? = try? JSONValue.parse(response.body) else {
            response.body = Array(#"{}"#.utf8)
            return response
        }
        for name in emailFields { fields[name] = nil }
        response.body = JSONValue.object(fields).encoded()
        return response
    }

    static let emailFields = ["email", "emailConfirmed", "emailAuthFactor"]

    /// A refusal for a scope the session lacks becomes `ScopeMissing` and an
    /// `account.needsScope` event (what to add with `bskyctl login --upgrade`).
    func checkScope(_ response: InboundResponse, call: XRPCCall, session: AccountSession) async throws(DaemonError) {
        guard response.status == 403 || response.status == 401 || response.status == 400,
              let body = XRPCErrorBody(response: response), let scope = Self.missingScope(body) else { return }
        let notice = ScopeNotice(account: session.id, scope: scope, secretsVersion: await session.record.secretsVersion)
        let now = environment.now()
        let isNew = environment.scopeNotices.withLock { notices in
            // Once per scope and session, again after ten minutes; a new login is a new session.
            if let last = notices[notice], now.timeIntervalSince(last) < 600 { return false }
            if notices.count > 10_000 { notices.removeAll() }
            notices[notice] = now
            return true
        }
        if isNew {
            await session.publish(.accountNeedsScope, fields: ["scope": .string(scope), "nsid": .string(call.nsid)])
        }
        throw .scopeMissing(account: session.id, scope: scope, reason: body.message ?? body.error ?? "refused")
    }

    /// The scope named by the reference PDS's `ScopeMissingError` ("Missing required scope
    /// \"repo:…\"", or the older "Missing required scope: repo:… (or equivalent)").
    static func missingScope(_ body: XRPCErrorBody) -> String? {
        let message = body.message ?? ""
        let prefix = "Missing required scope"
        guard body.error == "ScopeMissingError" || message.hasPrefix(prefix) else { return nil }
        var rest = Substring(message.hasPrefix(prefix) ? message.dropFirst(prefix.count) : "")
        rest = rest.drop { $0 == ":" || $0 == " " }
        if rest.hasPrefix("\"") {
            rest = rest.dropFirst()
            rest = rest.prefix { $0 != "\"" }
        } else {
            rest = rest.prefix { $0 != " " }
        }
        return rest.isEmpty ? "(unnamed)" : String(rest)
    }

    /// What the reference PDS answers for an account that moved away (deactivated there).
    static func isAccountDeactivated(_ response: InboundResponse) -> Bool {
        guard response.status == 401 || response.status == 400 else { return false }
        return XRPCErrorBody(response: response)?.error == "AccountDeactivated"
    }

    /// One call at the account's current PDS, with one refresh-and-retry when the token is refused.
    private func send(_ call: XRPCCall, session: AccountSession, upstream: UpstreamTime?) async throws(DaemonError)
        -> (response: InboundResponse, refusedAfterRefresh: Bool, pds: URL)
    {
        let (credentials, pds) = try await session.liveCallTarget()
        var request = XRPCRequest(service: pds, nsid: call.nsid, kind: call.kind, parameters: call.parameters,
                                  body: call.body)
        if let proxy = call.atprotoProxy { request.headers.append(("atproto-proxy", proxy)) }
        if let labelers = call.acceptLabelers { request.headers.append(("atproto-accept-labelers", labelers)) }
        guard case .bearer(let token) = credentials else {
            let (response, refused) = try await callWithDPoP(request, credentials: credentials, session: session,
                                                             upstream: upstream)
            return (response, refused, pds)
        }
        var response = try await send(request, token: token, upstream: upstream)
        guard Self.isExpiredToken(response) else { return (response, false, pds) }
        let fresh = try await session.replaceExpired(token: token)
        response = try await send(request, token: fresh, upstream: upstream)
        return (response, Self.isExpiredToken(response), pds)
    }

    private func send(_ request: XRPCRequest, token: String, upstream: UpstreamTime?) async throws(DaemonError)
        -> InboundResponse
    {
        let started = upstream.map { _ in ContinuousClock.now }
        defer { if let upstream, let started { upstream.add(ContinuousClock.now - started) } }
        do {
            return try await environment.http.send(request.outbound(authorization: "Bearer \(token)"),
                                                   timeout: environment.upstreamTimeout)
        } catch {
            throw .upstreamUnavailable(error.description)
        }
    }

    /// The reference PDS answers an expired access token with 400 `ExpiredToken`.
    static func isExpiredToken(_ response: InboundResponse) -> Bool {
        guard response.status == 400 || response.status == 401 else { return false }
        return XRPCErrorBody(response: response)?.error == "ExpiredToken"
    }

    static func result(of response: InboundResponse) -> JSONValue {
        var fields: [String: JSONValue] = ["status": .number(Double(response.status))]
        var headers: [String: JSONValue] = [:]
        for (name, value) in response.headers {
            let lowercased = String(decoding: name.utf8.map(InboundResponse.asciiLowercased), as: UTF8.self)
            if forwardedHeaders.contains(lowercased) { headers[lowercased] = .string(value) }
        }
        fields["headers"] = .object(headers)
        addBody(of: response, to: &fields)
        return .object(fields)
    }

    /// A result's `contentType` and `body` (JSON passed on as the server wrote it: key order
    /// and every digit of its numbers kept), or `bodyBase64` for anything else.
    static func addBody(of response: InboundResponse, to fields: inout [String: JSONValue]) {
        let mediaType = response.mediaType
        if let mediaType { fields["contentType"] = .string(mediaType) }
        if response.body.isEmpty {
            fields["body"] = .null
        } else if mediaType == "application/json", let json = try? JSONText(validating: response.body) {
            fields["body"] = .verbatim(json)
        } else {
            fields["bodyBase64"] = .string(Data(response.body).base64EncodedString())
        }
    }
}

/// One account lacking one scope, in one session (its tokens' version).
struct ScopeNotice: Hashable, Sendable {
    var account: UUID
    var scope: String
    var secretsVersion: Int64
}
