@_spi(Testing) import AccountStoreCore
import BlueskyTesting
import Foundation
import Testing
@testable import BlueskyDaemon

/// A record read from the store is taken in the order things happened: one read while this
/// host's own write is out may be older than that write, and is not taken over it.
@Suite("Records read from the store, in order")
struct StoredOrderTests {
    @Test("""
        another host's change announced while this host's needs-login verdict is being written: the record read then \
        (from before the verdict) does not undo it; memory and store agree once the write lands
        """)
    func staleReadDuringVerdict() async throws {
        let fixture = try CoreFixture()
        let session = try await fixture.addAccount(expiresIn: -10)
        fixture.pds.failNextRefreshes([ScriptedPDS.error(400, "ExpiredToken", "Token has been revoked")])
        let (held, release) = (Latch(), Latch())
        fixture.store.holdWrites { write in
            guard write == .markState else { return }
            held.open()
            await release.wait()
        }
        let refreshing = Task { try? await session.refresh() }
        await held.wait()
        #expect(await session.record.state == .needsLogin, "decided here; the store does not know yet")
        // The announcement of an older change arrives now: the store still holds the account
        // as it was before the verdict.
        #expect(try await fixture.stored(session).state == .active)
        #expect(await fixture.manager.applyStoreChange(.account(session.id)))
        #expect(await session.record.state == .needsLogin, "the older record was not taken over the verdict")
        fixture.store.holdWrites(nil)
        release.open()
        _ = await refreshing.value
        #expect(await session.record.state == .needsLogin)
        #expect(await session.record == (try await fixture.stored(session)), "memory = store")
    }
}
