import JSONRPC
/// `com.atproto.server.*`: legacy (password / app-password) sessions.
extension PDSService {
    func describeServer() -> TestbedResponse {
        .json([
            "did": .string(context.pdsDID),
            "availableUserDomains": [.string("." + context.domain)],
            "inviteCodeRequired": false,
            "phoneVerificationRequired": false,
            "links": [:],
            "contact": [:],
        ])
    }

    func createSession(_ request: TestbedRequest) throws(XRPCError) -> TestbedResponse {
        let body = try jsonBody(request)
        let identifier = try requiredString("identifier", in: body)
        let password = try requiredString("password", in: body)
        let invalid = XRPCError(.unauthorized, "AuthenticationRequired", "Invalid identifier or password")
        let normalized = identifier.hasPrefix("did:") ? identifier : identifier.lowercased()
        guard let account = context.accounts.account(identifier: normalized) else { throw invalid }
        let scope: String
        if password == account.password {
            scope = TokenScope.access
        } else if password == account.appPassword {
            scope = TokenScope.appPassword
        } else {
            throw invalid
        }
        if account.requiresAuthFactor, body["authFactorToken"]?.stringValue != account.authFactorToken {
            throw XRPCError(
                .unauthorized, "AuthFactorTokenRequired", "A sign in code has been sent to your email address")
        }
        let tokens = account.data.withLock { data in
            data.startSession(scope: scope) { context.issueTokens(for: account, accessScope: scope) }
        }
        return .json(sessionBody(account, tokens: tokens))
    }

    func refreshSession(_ request: TestbedRequest) throws(XRPCError) -> TestbedResponse {
        let auth = try authenticateRefresh(request, countRejections: true)
        let now = context.clock.now().timeIntervalSince1970
        let grace = context.configuration.refreshGracePeriod.seconds
        let outcome = auth.account.data.withLock { data in
            data.refresh(refreshJti: auth.claims.jti, now: now, gracePeriod: grace) { scope in
                context.issueTokens(for: auth.account, accessScope: scope)
            }
        }
        switch outcome {
        case .rotated(let tokens), .reusedWithinGrace(let tokens):
            var response = TestbedResponse.json(sessionBody(auth.account, tokens: tokens))
            if context.configuration.refreshLatency > .zero { response.delay = context.configuration.refreshLatency }
            return response
        case .revoked:
            throw XRPCError(.badRequest, "ExpiredToken", "Token has been revoked")
        }
    }

    func getSession(_ request: TestbedRequest) throws(XRPCError) -> TestbedResponse {
        let auth = try authenticateAccess(request)
        return .json(sessionBody(auth.account, tokens: nil))
    }

    /// A service token for `aud` (and `lxm`): what lets its holder act as the account at
    /// another service, so what a read-only client must never get.
    func getServiceAuth(_ request: TestbedRequest) throws(XRPCError) -> TestbedResponse {
        let auth = try authenticateAccess(request)
        guard let audience = request.query["aud"], !audience.isEmpty else {
            throw XRPCError(.badRequest, "InvalidRequest", "Error: Params must have the property \"aud\"")
        }
        let method = request.query["lxm"] ?? "*"
        return .json(["token": .string("svc.\(auth.account.did).\(audience).\(method)")])
    }

    func deleteSession(_ request: TestbedRequest) throws(XRPCError) -> TestbedResponse {
        let auth = try authenticateRefresh(request, countRejections: false)
        auth.account.data.withLock { $0.endSession(refreshJti: auth.claims.jti) }
        return TestbedResponse(status: .ok)
    }

    /// The session view createSession, refreshSession and getSession share.
    private func sessionBody(_ account: AccountState, tokens: IssuedTokens?) -> JSONValue {
        var body: [String: JSONValue] = [
            "did": .string(account.did),
            "handle": .string(account.handle),
            "didDoc": identity.didDocument(for: account),
            "email": .string("\(account.name)@\(context.domain)"),
            "emailConfirmed": true,
            "emailAuthFactor": .bool(account.requiresAuthFactor),
            "active": true,
        ]
        if let tokens {
            body["accessJwt"] = .string(tokens.accessJwt)
            body["refreshJwt"] = .string(tokens.refreshJwt)
        }
        return .object(body)
    }
}
