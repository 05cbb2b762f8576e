import ATTestbed
import Foundation
import Testing

@Suite("Testbed PDS sessions")
struct SessionTests {
    @Test("createSession accepts the password and the app password, by handle or DID")
    func createSessionSucceeds() async throws {
        try await TestbedHarness.with { harness in
            let account = await harness.testbed.createAccount(AccountSpec(name: "alice", password: "main-pw"))

            let byHandle = try await harness.createSession("alice.tb1.test", "main-pw")
            #expect(byHandle.status == 200)
            #expect(byHandle["did"] == account.did)
            #expect(byHandle["handle"] == "alice.tb1.test")
            #expect(byHandle.json["active"] as? Bool == true)
            #expect((byHandle.json["didDoc"] as? [String: any Sendable])?["id"] as? String == account.did)

            let byDID = try await harness.createSession(account.did, account.appPassword)
            #expect(byDID.status == 200)
            #expect(harness.testbed.stats(did: account.did).sessionsCreated == 2)
        }
    }

    @Test("createSession refuses a wrong password or an unknown identifier like the reference PDS")
    func createSessionRejects() async throws {
        try await TestbedHarness.with { harness in
            let account = await harness.testbed.createAccount(AccountSpec(name: "bob"))
            for (identifier, password) in [(account.handle, "wrong"), ("nobody.tb1.test", account.password)] {
                let response = try await harness.createSession(identifier, password)
                #expect(response.status == 401)
                #expect(response.errorName == "AuthenticationRequired")
                #expect(response["message"] == "Invalid identifier or password")
            }
            #expect(harness.testbed.stats(did: account.did).sessionsCreated == 0)
        }
    }

    @Test("An account with an auth factor needs the emailed code")
    func authFactor() async throws {
        try await TestbedHarness.with { harness in
            let account = await harness.testbed.createAccount(AccountSpec(name: "carol", requiresAuthFactor: true))
            for code in [nil, "WRONG-CODE"] {
                let refused = try await harness.createSession(account.handle, account.appPassword, authFactorToken: code)
                #expect(refused.status == 401)
                #expect(refused.errorName == "AuthFactorTokenRequired")
                #expect(refused["message"] == "A sign in code has been sent to your email address")
            }
            let accepted = try await harness.createSession(
                account.handle, account.appPassword, authFactorToken: account.authFactorToken)
            #expect(accepted.status == 200)
        }
    }

    @Test("Tokens carry the claims clients read")
    func tokenClaims() async throws {
        try await TestbedHarness.with({ $0.accessTokenLifetime = .seconds(600) }) { harness in
            let account = await harness.testbed.createAccount(AccountSpec(name: "dave"))
            let before = harness.testbed.now.timeIntervalSince1970
            let tokens = try await harness.login(account)
            let after = harness.testbed.now.timeIntervalSince1970
            let access = jwtClaims(tokens.access)
            let refresh = jwtClaims(tokens.refresh)
            #expect(access["sub"] as? String == account.did)
            #expect(access["aud"] as? String == harness.testbed.pdsDID)
            #expect(access["scope"] as? String == "com.atproto.appPass")
            #expect(refresh["scope"] as? String == "com.atproto.refresh")
            let issuedAt = try #require(access["iat"] as? Int)
            let expiresAt = try #require(access["exp"] as? Int)
            #expect(expiresAt - issuedAt == 600)
            // Issued during the login, however long a loaded machine made it take (iat is whole seconds).
            #expect(Double(issuedAt) >= before.rounded(.down) && Double(issuedAt) <= after.rounded(.up), "\(before) \(issuedAt) \(after)")
            #expect((refresh["jti"] as? String)?.isEmpty == false)
        }
    }

    @Test("refreshSession rotates; an old token within the grace period gets the same successor")
    func refreshRotationAndGrace() async throws {
        try await TestbedHarness.with({ $0.refreshGracePeriod = .seconds(7200) }) { harness in
            let account = await harness.testbed.createAccount(AccountSpec(name: "erin"))
            let first = try await harness.login(account)

            let rotated = try await harness.refresh(first.refresh)
            #expect(rotated.status == 200)
            let successorRefresh = try #require(rotated["refreshJwt"])
            #expect(successorRefresh != first.refresh)
            #expect(rotated["did"] == account.did)

            harness.testbed.advanceClock(by: .seconds(3600))
            let reused = try await harness.refresh(first.refresh)
            #expect(reused.status == 200)
            #expect(reused["refreshJwt"] == successorRefresh)
            #expect(reused["accessJwt"] == rotated["accessJwt"])

            harness.testbed.advanceClock(by: .seconds(3601))
            let late = try await harness.refresh(first.refresh)
            #expect(late.status == 400)
            #expect(late.errorName == "ExpiredToken")

            let next = try await harness.refresh(successorRefresh)
            #expect(next.status == 200)

            let stats = harness.testbed.stats(did: account.did)
            #expect(stats.refreshes == 3)
            #expect(stats.refreshTokenReuses == 1)
            #expect(stats.rejectedRefreshes == 1)
        }
    }

    @Test("An expired access token gets 400 ExpiredToken and is counted")
    func expiredAccessToken() async throws {
        // Simulated time, so a loaded machine cannot expire the fresh token too.
        try await TestbedHarness.with({ $0.accessTokenLifetime = .seconds(60) }) { harness in
            let account = await harness.testbed.createAccount(AccountSpec(name: "frank"))
            let tokens = try await harness.login(account)
            harness.testbed.advanceClock(by: .seconds(61))

            let response = try await harness.getSession(tokens.access)
            #expect(response.status == 400)
            #expect(response.errorName == "ExpiredToken")
            #expect(response["message"] == "Token has expired")

            let refreshed = try await harness.refresh(tokens.refresh)
            let freshAccess = try #require(refreshed["accessJwt"])
            #expect(try await harness.getSession(freshAccess).status == 200)

            let stats = harness.testbed.stats(did: account.did)
            #expect(stats.expiredAccessRejections == 1)
            #expect(stats.authenticatedCalls == 1)
        }
    }

    @Test("A one-second access lifetime gives tokens that expire one second after issue")
    func oneSecondLifetime() async throws {
        try await TestbedHarness.with({ $0.accessTokenLifetime = .seconds(1) }) { harness in
            let account = await harness.testbed.createAccount(AccountSpec(name: "fay"))
            let claims = jwtClaims(try await harness.login(account).access)
            #expect((claims["exp"] as? Int).map { $0 - (claims["iat"] as? Int ?? 0) } == 1)
        }
    }

    @Test("A per-account access lifetime overrides the testbed's")
    func perAccountLifetime() async throws {
        try await TestbedHarness.with { harness in
            let account = await harness.testbed.createAccount(AccountSpec(name: "gina", accessTokenLifetime: .seconds(30)))
            let claims = jwtClaims(try await harness.login(account).access)
            #expect((claims["exp"] as? Int).map { $0 - (claims["iat"] as? Int ?? 0) } == 30)
        }
    }

    @Test("Revoked sessions: access gets 401 InvalidToken, refresh gets 400 ExpiredToken")
    func revokedSessions() async throws {
        try await TestbedHarness.with { harness in
            let account = await harness.testbed.createAccount(AccountSpec(name: "hank"))
            let tokens = try await harness.login(account)
            harness.testbed.revokeSessions(did: account.did)

            let call = try await harness.getSession(tokens.access)
            #expect(call.status == 401)
            #expect(call.errorName == "InvalidToken")
            let refresh = try await harness.refresh(tokens.refresh)
            #expect(refresh.status == 400)
            #expect(refresh.errorName == "ExpiredToken")
            #expect(harness.testbed.stats(did: account.did).rejectedRefreshes == 1)
        }
    }

    @Test("deleteSession ends the session and its tokens")
    func deleteSession() async throws {
        try await TestbedHarness.with { harness in
            let account = await harness.testbed.createAccount(AccountSpec(name: "ivy"))
            let tokens = try await harness.login(account)
            let deleted = try await harness.pds.send(.post("/xrpc/com.atproto.server.deleteSession", bearer: tokens.refresh))
            #expect(deleted.status == 200)
            #expect(try await harness.getSession(tokens.access).status == 401)
            #expect(try await harness.refresh(tokens.refresh).errorName == "ExpiredToken")
            #expect(harness.testbed.stats(did: account.did).sessionsDeleted == 1)
        }
    }

    @Test("Missing, forged and wrong-kind tokens get the reference PDS's answers")
    func badCredentials() async throws {
        try await TestbedHarness.with { harness in
            let account = await harness.testbed.createAccount(AccountSpec(name: "jay"))
            let tokens = try await harness.login(account)

            let missing = try await harness.pds.send(.get("/xrpc/com.atproto.server.getSession"))
            #expect(missing.status == 401)
            #expect(missing.errorName == "AuthMissing")

            let forged = try await harness.getSession(tokens.access.dropLast(3) + "abc")
            #expect(forged.status == 400)
            #expect(forged.errorName == "InvalidToken")

            let refreshAsAccess = try await harness.getSession(tokens.refresh)
            #expect(refreshAsAccess.status == 400)
            #expect(refreshAsAccess["message"] == "Bad token scope")

            let accessAsRefresh = try await harness.refresh(tokens.access)
            #expect(accessAsRefresh.status == 400)
            #expect(accessAsRefresh.errorName == "InvalidToken")
        }
    }
}
