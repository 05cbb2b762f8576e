@_spi(Testing) import AccountStoreCore
import BlueskyTesting
import Foundation
import JSONRPC
import Synchronization
import Testing
@testable import BlueskyDaemon

/// A login of an account already kept takes the refresh's turn, and what it keeps of the session
/// it replaces is that session as it is then.
@Suite("A login in place of a session")
struct SignInAgainTests {
    @Test("""
        a login that keeps the refresh token it replaces (a server that sends none again), during a refresh: it waits \
        for the refresh and keeps the token the refresh rotated, live at the server, never the one it spent
        """)
    func loginKeepingRefreshTokenDuringRefresh() async throws {
        let (fixture, session, refreshing, release) = try await AccountSessionTests.refreshHeldAfterRotation()
        let before = try await session.currentSecrets()
        var login = await session.record
        login.lastRefreshAt = fixture.clock.now
        var fresh = fixture.pds.issue(did: login.did, expiresIn: 7200)
        fresh.refreshToken = ""
        let signingIn = Task { [fresh] in
            try await session.signInAgain(login, secrets: fresh) { record, secrets, _, replaced in
                var kept = secrets
                kept.refreshToken = replaced?.refreshToken ?? ""
                return (record, kept)
            }
        }
        // The login waits for the refresh: nothing is stored while the server's answer is held.
        try await Task.sleep(for: .milliseconds(200))
        #expect(try await fixture.store.secrets(for: session.id).refreshToken == before.refreshToken)
        fixture.pds.holdRefreshes(nil)
        release.open()
        _ = try? await refreshing.value
        let again = try await signingIn.value
        let stored = try await fixture.store.secrets(for: session.id)
        #expect(stored.accessToken == fresh.accessToken)
        #expect(stored.refreshToken != before.refreshToken, "not the token the refresh spent")
        #expect(fixture.pds.isLive(stored.refreshToken), "the kept refresh token is the live one")
        #expect(again.replacedSecrets?.refreshToken == stored.refreshToken)
        #expect(try await session.currentSecrets() == stored)
        #expect(await session.record == (try await fixture.stored(session)))
        // Its upkeep goes on with the kept token: a refresh spends it and gets a new one.
        try await session.refresh(force: true)
        #expect(fixture.pds.replays == 0)
    }
}
