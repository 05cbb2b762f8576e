import AccountStoreCore
import Foundation
@testable import PostgresStore
import Testing

/// The NOTIFY payload "tenant owner id", as a host reads what another one announced.
@Suite("Change announcements between hosts")
struct ChangePayloadTests {
    let id = UUID()

    @Test("another host's change to this tenant's account is heard, whatever its host name holds")
    func heard() {
        for owner in ["web-1/4242", "rack 7 node 2/99", "h/1"] {
            #expect(PostgresChangeListener.change("alice \(owner) \(id.uuidString)", tenant: "alice", owner: "web-2/1")
                == .account(id), "\(owner)")
        }
    }

    @Test("this host's own change, another tenant's, and malformed payloads are not")
    func ignored() {
        let own = "rack 7 node 2/99"
        #expect(PostgresChangeListener.change("alice \(own) \(id.uuidString)", tenant: "alice", owner: own) == nil)
        #expect(PostgresChangeListener.change("bob web-1/4 \(id.uuidString)", tenant: "alice", owner: own) == nil)
        for payload in ["", "alice", "alice \(id.uuidString)", "alice web-1/4 not-a-uuid"] {
            #expect(PostgresChangeListener.change(payload, tenant: "alice", owner: own) == nil, "\(payload)")
        }
    }
}
