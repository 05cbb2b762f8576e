import Crypto
import DPoP
import Foundation

/// Decoding done with Foundation, independently of the module's own base64url and JSON code,
/// so the tests do not check the implementation against itself.
enum Independent {
    static func base64URLDecode(_ text: some StringProtocol) -> Data? {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        return Data(base64Encoded: base64)
    }

    static func base64URLEncode(_ data: some DataProtocol) -> String {
        Data(data).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }

    /// The three parts of a compact JWS, header and claims as JSON objects.
    struct Parts {
        var header: [String: Any]
        var claims: [String: Any]
        var signingInput: Data
        var signature: Data
    }

    static func split(_ jws: String) throws -> Parts {
        let parts = jws.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let header = base64URLDecode(parts[0]), let claims = base64URLDecode(parts[1]),
              let signature = base64URLDecode(parts[2]) else { throw TestFailure("not a compact JWS: \(jws)") }
        return Parts(header: try JSONSerialization.jsonObject(with: header) as! [String: Any],
                     claims: try JSONSerialization.jsonObject(with: claims) as! [String: Any],
                     signingInput: Data((parts[0] + "." + parts[1]).utf8), signature: signature)
    }

    /// The CryptoKit public key described by a JWK dictionary.
    static func publicKey(jwk: [String: Any]) throws -> P256.Signing.PublicKey {
        guard let x = (jwk["x"] as? String).flatMap(base64URLDecode), let y = (jwk["y"] as? String).flatMap(base64URLDecode)
        else { throw TestFailure("JWK without coordinates") }
        return try P256.Signing.PublicKey(rawRepresentation: x + y)
    }

    static func sha256Base64URL(_ text: String) -> String {
        base64URLEncode(Data(SHA256.hash(data: Data(text.utf8))))
    }
}

struct TestFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// A fixed key: private scalar 0x01…0x20. Its public JWK and RFC 7638 thumbprint were computed
/// with Python's joserfc 1.6.5 (`ECKey.import_key(...).thumbprint()`), not with this code.
enum FixtureKey {
    static let rawPrivateKey = Data(1...32)
    static let x = "UVw9brnjlrkE0_7Kf1T9zQzB6Ze_N13KUVrQpsO0A18"
    static let y = "RTa-OlDzGPv5pUdZAqIhUCvvDVfgjFOyzApW8X2fk1Q"
    static let thumbprint = "6UoWwDCkLjV0J-pQG8c0THxbVhBcpR0AZDift1Yl5DM"

    static var key: DPoPKey { try! DPoPKey(rawRepresentation: rawPrivateKey) }
}

/// A clock the test sets by hand.
final class ManualClock: @unchecked Sendable {
    private let lock = NSLock()
    private var current: Date

    init(_ start: Date = Date(timeIntervalSince1970: 1_800_000_000)) { current = start }

    var now: Date {
        get { lock.withLock { current } }
        set { lock.withLock { current = newValue } }
    }

    func advance(by seconds: TimeInterval) { now = now.addingTimeInterval(seconds) }

    var reading: @Sendable () -> Date { { [self] in now } }
}
