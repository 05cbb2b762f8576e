import AccountStoreCore
import Crypto
import Foundation
@testable import PostgresStore
import Testing

/// The NOTIFY payload "owner id mac" on a tenant's own channel, as a host reads what another
/// one announced: signed under the tenant's store key, so another tenant (which may NOTIFY any
/// channel whose name it learns) cannot make a host act.
@Suite("Change announcements between hosts")
struct ChangePayloadTests {
    let id = UUID()
    let key = SymmetricKey(size: .bits256)

    @Test("another host's change to this tenant's account is heard, whatever its host name holds")
    func heard() {
        let signer = ChangeSigner(storeKey: key, tenant: "alice")
        for owner in ["web-1/4242", "rack 7 node 2/99", "h/1"] {
            let (heard, forged) = signer.change(signer.payload(owner: owner, id: id), me: "web-2/1")
            #expect(heard == id && !forged, "\(owner)")
        }
    }

    @Test("this host's own change is not news; another tenant's, another key's, an edited or malformed payload is forged")
    func ignored() {
        let alice = ChangeSigner(storeKey: key, tenant: "alice")
        let own = "rack 7 node 2/99"
        #expect(alice.change(alice.payload(owner: own, id: id), me: own) == (nil, false))
        let bob = ChangeSigner(storeKey: key, tenant: "bob")
        let stranger = ChangeSigner(storeKey: SymmetricKey(size: .bits256), tenant: "alice")
        let signed = alice.payload(owner: "web-1/4", id: id)
        let other = UUID().uuidString.lowercased()
        for payload in [bob.payload(owner: "web-1/4", id: id), stranger.payload(owner: "web-1/4", id: id),
                        signed.replacingOccurrences(of: id.uuidString.lowercased(), with: other),
                        signed.replacingOccurrences(of: "web-1/4", with: "web-1/5"),
                        "alice web-1/4 \(id.uuidString)", "", "alice", "web-1/4 not-a-uuid mac"] {
            #expect(alice.change(payload, me: own) == (nil, true), "\(payload)")
        }
    }

    @Test("each tenant has a channel of its own, named under its key: unguessable without it, within PostgreSQL's 63 bytes")
    func channels() {
        let alice = ChangeSigner(storeKey: key, tenant: "alice").channel
        #expect(alice != ChangeSigner(storeKey: key, tenant: "bob").channel)
        #expect(alice != ChangeSigner(storeKey: SymmetricKey(size: .bits256), tenant: "alice").channel)
        #expect(alice == ChangeSigner(storeKey: key, tenant: "alice").channel, "every host of the tenant listens on it")
        #expect(alice.hasPrefix("blueskyd_") && alice.utf8.count == 41 && alice != "blueskyd_accounts")
    }
}
