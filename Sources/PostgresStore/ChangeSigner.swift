import Crypto
import Foundation
import WebBasics

/// Names a tenant's NOTIFY channel and signs what its hosts announce on it, under a key derived
/// from the store key, which only that tenant's hosts hold.
///
/// Every tenant shares one database, and any role may LISTEN on or NOTIFY any channel. A
/// channel named by a MAC of the tenant is one another tenant cannot guess (so it neither hears
/// which accounts change nor floods the listeners), and a payload signed over the tenant, the
/// sender and the account is one it cannot forge should the name leak. A payload replayed by
/// someone who heard it only makes a host read that account again, checked against its seal.
struct ChangeSigner: Sendable {
    private let key: SymmetricKey
    /// `blueskyd_` and 32 hex digits: under PostgreSQL's 63-byte limit for a channel name.
    let channel: String
    let tenant: String

    init(storeKey: SymmetricKey, tenant: String) {
        key = HKDF<SHA256>.deriveKey(inputKeyMaterial: storeKey, info: Data("blueskyd/notify/v1".utf8), outputByteCount: 32)
        self.tenant = tenant
        let name = HMAC<SHA256>.authenticationCode(for: Data("channel\0\(tenant)".utf8), using: key)
        channel = "blueskyd_" + name.prefix(16).map { String(format: "%02x", $0) }.joined()
    }

    /// "owner id mac": the sending host (a name that may hold spaces), the account, and the
    /// first 16 bytes of a MAC over the tenant, the owner and the id, in base64url.
    func payload(owner: String, id: UUID) -> String {
        "\(owner) \(id.uuidString.lowercased()) \(mac(owner: owner, id: id))"
    }

    /// The account another host announced, or nil: this host's own announcement, a payload
    /// that is not one, or one whose MAC does not hold (`forged` then says so).
    func change(_ payload: String, me: String) -> (id: UUID?, forged: Bool) {
        guard let last = payload.lastIndex(of: " ") else { return (nil, true) }
        let head = payload[..<last]
        guard let middle = head.lastIndex(of: " "),
              let id = UUID(uuidString: String(head[head.index(after: middle)...])) else { return (nil, true) }
        let owner = String(head[..<middle])
        let expected = mac(owner: owner, id: id)
        // Both sides are public lengths; the comparison itself need not be constant-time for a
        // MAC the sender cannot compute anyway, but costs nothing to make so.
        let given = payload[payload.index(after: last)...]
        guard given.utf8.count == expected.utf8.count,
              zip(given.utf8, expected.utf8).reduce(UInt8(0), { $0 | ($1.0 ^ $1.1) }) == 0 else { return (nil, true) }
        return (owner == me ? nil : id, false)
    }

    private func mac(owner: String, id: UUID) -> String {
        var data = Data("\(tenant)\0\(owner)\0".utf8)
        withUnsafeBytes(of: id.uuid) { data.append(contentsOf: $0) }
        return Base64URL.encode(HMAC<SHA256>.authenticationCode(for: data, using: key).prefix(16))
    }
}
