@_spi(Testing) import AccountStoreCore
import Foundation
import Testing
@testable import BlueskyDaemon

/// What a proxied call reads off the session's actor (`LiveCallTargets`): published from the
/// session's current state, withdrawn by every change, never used past its token's life.
@Suite("Call targets read without a hop to the session", .timeLimit(.minutes(1)))
struct LiveCallTargetTests {
    @Test("a call publishes its target; a refresh withdraws it, and the next call reads the new token")
    func refreshWithdraws() async throws {
        let fixture = try CoreFixture()
        let session = try await fixture.addAccount()
        let targets = fixture.environment.liveTargets
        #expect(targets.target(session.id, owner: session, now: fixture.clock.now) == nil, "nothing before a call")
        let first = try await session.liveCallTarget()
        #expect(targets.target(session.id, owner: session, now: fixture.clock.now)?.credentials.token == first.credentials.token)
        #expect(try await session.liveCallTarget().credentials.token == first.credentials.token)

        _ = try await session.refresh(force: true)
        #expect(targets.target(session.id, owner: session, now: fixture.clock.now) == nil, "the refresh withdrew the old token")
        let second = try await session.liveCallTarget()
        #expect(second.credentials.token != first.credentials.token)
        #expect(targets.target(session.id, owner: session, now: fixture.clock.now)?.credentials.token == second.credentials.token)
        #expect(fixture.pds.refreshRequests == 1)
    }

    @Test("a target is not read within a second of its token's expiry: the call goes to the session, which refreshes once")
    func expiryGoesToSession() async throws {
        let fixture = try CoreFixture()
        let session = try await fixture.addAccount(expiresIn: 3600)
        let first = try await session.liveCallTarget()
        fixture.clock.advance(3599.5)
        #expect(fixture.environment.liveTargets.target(session.id, owner: session, now: fixture.clock.now) == nil)
        let next = try await session.liveCallTarget()
        #expect(next.credentials.token != first.credentials.token)
        #expect(fixture.pds.refreshRequests == 1)
    }

    @Test("a logout withdraws the target: no call reads the token it revoked")
    func logoutWithdraws() async throws {
        let fixture = try CoreFixture()
        let session = try await fixture.addAccount()
        _ = try await session.liveCallTarget()
        _ = try await fixture.manager.remove(session.id.uuidString)
        #expect(fixture.environment.liveTargets.target(session.id, owner: session, now: fixture.clock.now) == nil)
        #expect(throws: DaemonError.self) { try fixture.environment.registry.session(session.id.uuidString) }
        // A call that found the session before it went publishes nothing again.
        _ = try? await session.liveCallTarget()
        #expect(fixture.environment.liveTargets.count == 0)
    }

    @Test("an account the store no longer holds leaves nothing published, even from a call under way; a new session under its id reads only its own")
    func forgottenSession() async throws {
        let fixture = try CoreFixture()
        let old = try await fixture.addAccount()
        let targets = fixture.environment.liveTargets
        _ = try await old.liveCallTarget()
        let record = await old.record
        #expect(await fixture.manager.forget(record, fields: [:]))
        #expect(targets.count == 0, "forgetting the account withdrew its target")
        // A call that found the session before it was forgotten asks it once more.
        _ = try await old.callTarget()
        #expect(targets.count == 0, "a session no longer in the registry publishes nothing")

        let new = await fixture.manager.track(record)
        #expect(targets.target(record.id, owner: new, now: fixture.clock.now) == nil)
        _ = try await new.liveCallTarget()
        #expect(targets.target(record.id, owner: new, now: fixture.clock.now) != nil)
        #expect(targets.target(record.id, owner: old, now: fixture.clock.now) == nil, "the old session reads nothing of the new one's")
    }

    @Test("an OAuth 2.0 account's target is not an atproto call's, nor the other way round: each gets its method's refusal")
    func kindsKeptApart() async throws {
        let fixture = try CoreFixture()
        let session = try await fixture.addAccount()
        _ = try await session.liveCallTarget()
        await #expect(throws: DaemonError.self) { try await session.liveHTTPTarget() }
    }
}
