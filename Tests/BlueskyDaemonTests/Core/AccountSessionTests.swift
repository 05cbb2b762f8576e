@_spi(Testing) import AccountStoreCore
import BlueskyTesting
import Foundation
import JSONRPC
import Synchronization
import Testing
@testable import BlueskyDaemon

/// The account's owner in process: every refresh branch, and the races that once left memory
/// and the store apart, set up on purpose by holding a store write or a server's answer.
@Suite("An account's session in process: refresh branches and races", .timeLimit(.minutes(1)))
struct AccountSessionTests {
    @Test("twenty callers meeting an expired token share one refresh")
    func singleFlight() async throws {
        let fixture = try CoreFixture()
        let session = try await fixture.addAccount(expiresIn: -10)
        let tokens = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<20 { group.addTask { try await session.validSecrets().accessToken } }
            return try await group.reduce(into: Set<String>()) { $0.insert($1) }
        }
        #expect(fixture.pds.refreshRequests == 1 && tokens.count == 1)
        #expect(try await fixture.stored(session).secretsVersion == 2)
        #expect(await session.record == (try await fixture.stored(session)), "memory and store agree")
    }

    @Test("a default set while a refresh finishes: the refresh's tokens and dates stay, the flag is set, memory = store")
    func setDefaultDuringRefresh() async throws {
        let fixture = try CoreFixture()
        let session = try await fixture.addAccount(expiresIn: -10)
        let (held, release) = (Latch(), Latch())
        fixture.store.holdWrites { write in
            guard write == .setDefault else { return }
            held.open()
            await release.wait()
        }
        let choosing = Task { try await fixture.manager.setDefault(session.id.uuidString) }
        await held.wait()
        // The refresh runs to its end between the store write and the session's change.
        _ = try await session.refresh()
        release.open()
        _ = try await choosing.value
        let (memory, stored) = (await session.record, try await fixture.stored(session))
        #expect(memory.isDefault && memory.secretsVersion == 2 && memory.lastRefreshAt != nil)
        #expect(memory == stored, "memory and store agree")
        #expect(fixture.environment.registry.defaultID == session.id)
    }

    @Test("an identity saved while a refresh finishes: the new handle and PDS and the new tokens, memory = store")
    func identityDuringRefresh() async throws {
        let fixture = try CoreFixture()
        let session = try await fixture.addAccount(expiresIn: -10)
        let (held, release) = (Latch(), Latch())
        fixture.store.holdWrites { write in
            guard write == .saveIdentity else { return }
            held.open()
            await release.wait()
        }
        let saving = Task { try await session.adoptIdentity(handle: "renamed.test", handleVerified: true, pds: nil) }
        await held.wait()
        _ = try await session.refresh()
        release.open()
        try await saving.value
        let (memory, stored) = (await session.record, try await fixture.stored(session))
        #expect(memory.handle == "renamed.test" && memory.secretsVersion == 2)
        #expect(memory == stored, "memory and store agree")
    }

    @Test("a move verdict racing a refresh's save: whichever wins, memory and store say the same")
    func movedAwayDuringSave() async throws {
        let fixture = try CoreFixture()
        let session = try await fixture.addAccount(expiresIn: -10)
        let checked = await session.record
        let (held, release) = (Latch(), Latch())
        fixture.store.holdWrites { write in
            guard write == .saveRefreshedSession else { return }
            held.open()
            await release.wait()
        }
        let refreshing = Task { try await session.refresh() }
        await held.wait()
        // The verdict is recorded over the tokens the refresh is about to replace.
        await session.markMovedAway(from: checked, reason: "moved to https://elsewhere.test; log in again", detail: "moved")
        release.open()
        _ = try? await refreshing.value
        let (memory, stored) = (await session.record, try await fixture.stored(session))
        #expect(memory.state == stored.state && memory.secretsVersion == stored.secretsVersion && memory == stored,
                "memory \(memory.state)/\(memory.secretsVersion), store \(stored.state)/\(stored.secretsVersion)")
    }

    @Test("""
        the store refusing the rotated tokens: calls use them from memory, this host keeps its own timer for the save, \
        the save goes through once the store can write, and no refresh token is sent twice
        """)
    func refusedSave() async throws {
        let fixture = try CoreFixture()
        let session = try await fixture.addAccount(expiresIn: -10)
        let health = fixture.store.health
        fixture.store.holdWrites { write in
            if write == .saveRefreshedSession { health.injectWriteFailures("database or disk is full") }
        }
        let rotated = try await session.refresh()
        let state = await session.state
        #expect(state.unsavedSecrets == rotated && state.dueIsLocal, "held in memory, saved again on this host's timer")
        #expect(try await fixture.stored(session).secretsVersion == 1, "nothing was saved")
        #expect(try await session.validSecrets() == rotated, "calls use the rotated tokens")
        #expect(fixture.pds.refreshRequests == 1)

        fixture.store.holdWrites(nil)
        health.injectWriteFailures(nil)
        fixture.clock.advance(700)  // past the longest backoff, before the rotated token's refresh is due
        await session.upkeep(.due)
        #expect(await session.state.unsavedSecrets == nil)
        #expect(try await fixture.store.secrets(for: session.id) == rotated)
        #expect(fixture.pds.refreshRequests == 1 && fixture.pds.replays == 0, "saved, not refreshed again")
        #expect(await session.record == (try await fixture.stored(session)))
    }

    /// An account whose refresh is out: the server has rotated its token and holds the answer
    /// until `release` opens.
    static func refreshHeldAfterRotation() async throws
        -> (CoreFixture, AccountSession, Task<AccountSecrets, any Error>, Latch)
    {
        let fixture = try CoreFixture()
        let session = try await fixture.addAccount(expiresIn: -10)
        let (answered, release) = (Latch(), Latch())
        fixture.pds.holdRefreshes {
            answered.open()
            await release.wait()
        }
        let refreshing = Task { try await session.refresh() }
        await answered.wait()
        return (fixture, session, refreshing, release)
    }

    @Test("a logout during a refresh waits for it and revokes the token it rotated: no token of the account is left live at the server")
    func logoutDuringRefresh() async throws {
        let (fixture, session, refreshing, release) = try await Self.refreshHeldAfterRotation()
        let removing = Task { try await fixture.manager.remove(session.id.uuidString) }
        // The logout has begun: it is waiting for the refresh, or (as it once did) has revoked
        // the token being replaced.
        #expect(await eventually { await session.state.isRemoving || fixture.pds.deleteRequests > 0 })
        fixture.pds.holdRefreshes(nil)
        release.open()
        let (_, ended) = try await removing.value
        _ = try? await refreshing.value
        #expect(ended)
        #expect(fixture.pds.liveRefreshTokens(did: "did:plc:alice") == 0, "the rotated token was revoked too")
        #expect(try await fixture.store.account(id: session.id) == nil)
        // Nothing refreshes an account that is gone.
        await #expect(throws: DaemonError.self) { try await session.refresh(force: true) }
        #expect(fixture.pds.refreshRequests == 1)
    }

    @Test("a login during a refresh wins: the refresh's answer is dropped, the new session stays")
    func loginDuringRefresh() async throws {
        let (fixture, session, refreshing, release) = try await Self.refreshHeldAfterRotation()
        var login = await session.record
        login.authKind = .appPassword
        login.lastRefreshAt = fixture.clock.now
        let secrets = fixture.pds.issue(did: login.did, expiresIn: 7200)
        login.secretsVersion = try await fixture.store.replaceSession(login, secrets: secrets)
        await session.signedIn(login, secrets: secrets)
        fixture.pds.holdRefreshes(nil)
        release.open()
        #expect(try await refreshing.value == secrets, "the callers get the login's tokens")
        #expect(try await fixture.store.secrets(for: session.id) == secrets)
        #expect(await session.record == (try await fixture.stored(session)))
    }

    @Test("""
        a login stored by another host while this host's save is out: the save loses, and the callers get the login's \
        tokens, never this refresh's as the login's version
        """)
    func loginElsewhereDuringSave() async throws {
        let database = MemoryDatabase(shared: true)
        let a = try CoreFixture(database: database, leaseOwner: "host-a")
        let b = try CoreFixture(database: database, leaseOwner: "host-b")
        let onA = try await a.addAccount(expiresIn: -10)
        let (held, release) = (Latch(), Latch())
        a.store.holdWrites { write in
            guard write == .saveRefreshedSession else { return }
            held.open()
            await release.wait()
        }
        let refreshing = Task { try await onA.refresh() }
        await held.wait()
        var login = try #require(try await b.store.account(id: onA.id))
        login.lastRefreshAt = b.clock.now
        let secrets = b.pds.issue(did: login.did, expiresIn: 7200)
        let version = try await b.store.replaceSession(login, secrets: secrets)
        release.open()
        #expect(try await refreshing.value == secrets, "the callers get the login's tokens")
        #expect(try await onA.currentSecrets() == secrets)
        #expect(await onA.record.secretsVersion == version)
        #expect(try await a.store.secrets(for: onA.id) == secrets)
    }

    @Test("rotated tokens whose save is out are not saved a second time beside it, even with an old backoff date passed")
    func oneSaveAtATime() async throws {
        let fixture = try CoreFixture()
        let session = try await fixture.addAccount(expiresIn: -10)
        // A refresh failed earlier: its backoff date is set, and passes.
        fixture.pds.failNextRefreshes([ScriptedPDS.error(502, "InternalServerError", "down")])
        await #expect(throws: DaemonError.self) { try await session.refresh() }
        fixture.clock.advance(3600)
        let saves = Mutex(0)
        let (held, release) = (Latch(), Latch())
        fixture.store.holdWrites { write in
            guard write == .saveRefreshedSession else { return }
            // The first save waits; a second one (the defect) would go straight through.
            guard saves.withLock({ $0 += 1; return $0 == 1 }) else { return }
            held.open()
            await release.wait()
        }
        let refreshing = Task { try await session.refresh() }
        await held.wait()
        // The schedule's upkeep comes meanwhile: the save on its way is not started again.
        await session.upkeep(.due)
        release.open()
        _ = try await refreshing.value
        #expect(saves.withLock { $0 } == 1)
        #expect(await session.record == (try await fixture.stored(session)))
        #expect(await session.record.state == .active)
    }

    @Test("two hosts: a claim over tokens another host rotated adopts them and sends nothing; a held lease is waited out")
    func twoHosts() async throws {
        let database = MemoryDatabase(shared: true)
        let a = try CoreFixture(database: database, leaseOwner: "host-a")
        let b = try CoreFixture(database: database, leaseOwner: "host-b")
        let onA = try await a.addAccount(expiresIn: -10)
        let onB = await b.manager.track(try #require(try await b.store.account(id: onA.id)))
        let rotated = try await onA.refresh()
        #expect(try await onB.refresh() == rotated, "B adopted A's tokens")
        #expect(a.pds.refreshRequests == 1 && b.pds.refreshRequests == 0)
        #expect(await onB.record.secretsVersion == 2)

        // A holds the lease: B's refresh for the schedule (which does not wait) comes back when
        // it ends, sending nothing.
        let claim = try await a.store.claimRefresh(id: onA.id, expecting: 2, at: b.clock.now)
        #expect(claim == .granted(interruptedAt: nil))
        await #expect(throws: DaemonError.self) { try await onB.refresh(waitForHolder: false) }
        let state = await onB.state
        #expect(state.trouble.heldElsewhereUntil != nil && state.due == state.trouble.heldElsewhereUntil)
        #expect(b.pds.refreshRequests == 0)
    }

    @Test("accounts.list shows the date the scheduler holds, the same on every call; methods answer without a socket")
    func methodsInProcess() async throws {
        let fixture = try CoreFixture()
        let session = try await fixture.addAccount()
        try await fixture.addAccount("bob")
        let first = try await fixture.call("accounts.list").get()
        let second = try await fixture.call("accounts.list").get()
        let alice = first["accounts"]?.arrayValue?.first { $0["did"] == "did:plc:alice" }
        #expect(alice?["nextRefreshAt"] == second["accounts"]?.arrayValue?.first { $0["did"] == "did:plc:alice" }?["nextRefreshAt"])
        #expect(alice?["nextRefreshAt"] == AccountView.timestamp(await session.state.due))
        let chosen = try await fixture.call("accounts.setDefault", ["account": "did:plc:bob"]).get()
        #expect(chosen["account"]?["isDefault"] == true)
        let status = try await fixture.call("daemon.status").get()
        #expect(status["accounts"] == 2 && status["active"] == 2)
        if case .failure(let error) = await fixture.call("accounts.setDefault", ["account": "nobody.test"]) {
            #expect(error.name == "AccountNotFound")
        } else {
            Issue.record("an unknown account is refused")
        }
    }
}

private extension Result where Failure == RPCError {
    func get() throws -> Success {
        switch self {
        case .success(let value): return value
        case .failure(let error): throw error
        }
    }
}
