import Crypto
import Foundation
import Synchronization
import WebBasics

/// Local gateway tokens: opaque random strings (never a JWT, so none can pass for an atproto
/// token) each bound to a policy, handed to one program by `bskyctl exec` and revoked when it
/// exits. Only their SHA-256 is kept, so a memory dump holds no usable token.
final class GatewayTokens: Sendable {
    /// What tokens start with: a log or a leaked environment shows at once what it is.
    static let prefix = "bskyd-gw-"

    private let issued = Mutex<[SHA256Digest: ClientPolicy]>([:])

    /// A new token for `policy`.
    func issue(_ policy: ClientPolicy) -> String {
        var random = SystemRandomNumberGenerator()
        let bytes = (0..<32).map { _ in UInt8.random(in: .min ... .max, using: &random) }
        let token = Self.prefix + Base64URL.encode(bytes)
        issued.withLock { $0[SHA256.hash(data: Array(token.utf8))] = policy }
        return token
    }

    /// The policy of a live token; nil for one never issued or revoked.
    func policy(of token: some StringProtocol) -> ClientPolicy? {
        guard token.hasPrefix(Self.prefix) else { return nil }
        let digest = SHA256.hash(data: Array(token.utf8))
        return issued.withLock { $0[digest] }
    }

    /// Ends `token`; true when it was live.
    @discardableResult
    func revoke(_ token: some StringProtocol) -> Bool {
        let digest = SHA256.hash(data: Array(token.utf8))
        return issued.withLock { $0.removeValue(forKey: digest) != nil }
    }

    var count: Int { issued.withLock { $0.count } }

    /// Whether `token` vouches for a TCP client whose owner cannot be read: only the token
    /// file's does (the file is the daemon's user's alone); an exec token, which its program
    /// may have handed on, does not.
    func vouches(_ token: (some StringProtocol)?) -> Bool {
        token.map { policy(of: $0) == .unrestricted } ?? false
    }
}
