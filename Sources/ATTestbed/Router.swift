/// Virtual hosts: `pds.<domain>` (also as `pds2.<domain>`), `plc.<domain>`, the authorization servers `auth.<domain>` and
/// `rogue-auth.<domain>`, client metadata at `clients.<domain>`, a Mastodon-compatible instance at
/// `social.<domain>`, a generic OAuth 2.0 server at `sso.<domain>`, and every other `<name>.<domain>` is a handle.
struct Router: Sendable {
    let context: TestbedContext
    let identity: IdentityEndpoints
    let pds: PDSService
    let authorizationServer: AuthorizationServer
    let rogueAuthorizationServer: AuthorizationServer
    let mastodon: MastodonInstance
    let genericOAuth: GenericOAuthServer

    init(context: TestbedContext) {
        self.context = context
        identity = IdentityEndpoints(context: context)
        pds = PDSService(context: context, identity: identity)
        authorizationServer = AuthorizationServer(context: context, state: context.oauth.issuer)
        rogueAuthorizationServer = AuthorizationServer(context: context, state: context.oauth.rogueIssuer)
        mastodon = MastodonInstance(context: context)
        genericOAuth = GenericOAuthServer(context: context)
    }

    func handle(_ request: TestbedRequest) -> TestbedResponse {
        var response = route(request)
        response.headers.replaceOrAdd(name: "Date", value: HTTPDate.format(context.clock.now()))
        if let target = answerTarget(of: request), let shape = context.shapes.take(target) {
            switch shape {
            case .stallAfterHalfBody(let stall): response.stall = stall
            case .delayed(let delay): response.delay = delay
            }
        }
        return response
    }

    private func route(_ request: TestbedRequest) -> TestbedResponse {
        let host = request.host
        if host == context.pdsHost || host == context.pdsAliasHost { return pds.handle(request) }
        if host == context.plcHost { return identity.handlePLC(request) }
        if host == authorizationServer.state.host { return authorizationServer.handle(request) }
        if host == rogueAuthorizationServer.state.host { return rogueAuthorizationServer.handle(request) }
        if host == context.oauth.clientsHost { return context.oauth.clients.handle(request) }
        if host == mastodon.host { return mastodon.handle(request) }
        if host == genericOAuth.store.host { return genericOAuth.handle(request) }
        if host.hasSuffix("." + context.domain) { return identity.handleHandleHost(request) }
        return .text("misdirected request: no such host on this testbed", status: .misdirectedRequest)
    }
}
