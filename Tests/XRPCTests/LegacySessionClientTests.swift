import ATTestbed
import BlueskyHTTP
import BlueskyTesting
import Foundation
import Testing
import XRPC

@Suite("App-password sessions against the testbed PDS over HTTPS")
struct LegacySessionClientTests {
    @Test("login, rotation, logout, and each kind of refusal")
    func sessionLifecycle() async throws {
        try HermeticNetwork.require()
        let directory = try TemporaryDirectory("xrpc-sessions")
        defer { directory.remove() }
        let testbed = try await Testbed.startInHermeticNetwork(directory: directory.file("testbed"))
        let http = try OutboundHTTP(.init(extraCAFile: testbed.caFile))
        let account = await testbed.createAccount(AccountSpec(name: "carol"))
        let guarded = await testbed.createAccount(AccountSpec(name: "dave", requiresAuthFactor: true))
        let client = LegacySessionClient(http: http)
        let pds = try #require(URL(string: testbed.pdsURL))

        let session = try await client.createSession(pds: pds, identifier: account.handle, password: account.appPassword)
        #expect(session.did == account.did)
        #expect(session.accessExpiresAt.map { $0 > Date() } == true, "the access token's expiry is known")

        await #expect(throws: SessionError.self) {
            _ = try await client.createSession(pds: pds, identifier: account.handle, password: "wrong")
        }
        do {
            _ = try await client.createSession(pds: pds, identifier: guarded.did, password: guarded.appPassword)
            Issue.record("an emailed code is required first")
        } catch {
            guard case .authFactorTokenRequired = error else { throw error }
        }
        let withCode = try await client.createSession(pds: pds, identifier: guarded.did, password: guarded.appPassword,
                                                      authFactorToken: guarded.authFactorToken)
        #expect(withCode.did == guarded.did)

        let rotated = try await client.refreshSession(pds: pds, refreshJwt: session.refreshJwt)
        #expect(rotated.refreshJwt != session.refreshJwt)
        #expect(testbed.stats(did: account.did).refreshes == 1)

        testbed.injectFailures(nsid: "com.atproto.server.refreshSession", status: 503, count: 1)
        do {
            _ = try await client.refreshSession(pds: pds, refreshJwt: rotated.refreshJwt)
            Issue.record("the injected 503 must fail the refresh")
        } catch {
            guard case .transient = error else { throw error }
        }

        try await client.deleteSession(pds: pds, refreshJwt: rotated.refreshJwt)
        #expect(testbed.stats(did: account.did).sessionsDeleted == 1)
        do {
            _ = try await client.refreshSession(pds: pds, refreshJwt: rotated.refreshJwt)
            Issue.record("a deleted session cannot be refreshed")
        } catch {
            switch error {
            case .rejected, .expiredToken: break
            default: throw error
            }
        }
        try await http.shutdown()
        try await testbed.shutdown()
    }
}
