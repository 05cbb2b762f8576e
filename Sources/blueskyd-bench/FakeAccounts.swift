import AccountStoreCore
import DaemonHarness
import Foundation
import WebBasics

/// Registers made-up app-password accounts by writing the daemon's store directly, as blueskyd
/// itself would have after logging them in: same directory, same key file, sealed secrets.
enum FakeAccounts {
    static let batchSize = 5_000

    /// Writes `count` accounts into `<stateDirectory>`.
    static func seed(stateDirectory: String, count: Int, pdsURL: String) async throws {
        let now = Date()
        try await write(stateDirectory: stateDirectory, count: count) { account(index: $0, pdsURL: pdsURL, now: now) }
    }

    /// Writes accounts `0..<count`, made by `account`, into `<stateDirectory>` in batches, with the
    /// key at `<stateDirectory>/store.key` (both created when missing: blueskyd reads exactly that file).
    static func write(stateDirectory: String, count: Int,
                      account: (Int) -> (record: AccountRecord, secrets: AccountSecrets)) async throws {
        do {
            try await SeededLocalStore.write(stateDirectory: stateDirectory, count: count, batchSize: batchSize, account: account)
        } catch {
            throw BenchError.storeFailed(describe(error))
        }
    }

    /// Account `index`: a unique did:plc and handle, tokens shaped like the PDS's JWTs whose
    /// access token expires a day from now, so no refresh is due while the daemon is measured.
    static func account(index: Int, pdsURL: String, now: Date) -> (record: AccountRecord, secrets: AccountSecrets) {
        let did = "did:plc:" + base32(index, width: 24)
        let handle = "bench-\(index).bench.test"
        let accessExpiry = now.addingTimeInterval(24 * 3600)
        let refreshExpiry = now.addingTimeInterval(90 * 24 * 3600)
        let record = AccountRecord(
            did: did, handle: handle, handleVerified: true, pds: pdsURL, authKind: .appPassword,
            state: .active, isDefault: index == 0, createdAt: now, lastRefreshAt: now,
            accessExpiresAt: accessExpiry, refreshExpiresAt: refreshExpiry)
        let issued = Int(now.timeIntervalSince1970)
        let secrets = AccountSecrets(
            accessToken: jwt(#"{"exp":\#(Int(accessExpiry.timeIntervalSince1970)),"iat":\#(issued),"#
                + #""scope":"com.atproto.appPass","sub":"\#(did)"}"#),
            refreshToken: jwt(#"{"exp":\#(Int(refreshExpiry.timeIntervalSince1970)),"iat":\#(issued),"#
                + #""jti":"bench-\#(index)","scope":"com.atproto.refresh","sub":"\#(did)"}"#))
        return (record, secrets)
    }

    private static let header = Base64URL.encode(Array(#"{"typ":"at+jwt","alg":"ES256K"}"#.utf8))
    // One random signature for all: nothing verifies it, and 100,000 fresh ones cost seconds.
    private static let signature = Base64URL.encode((0..<64).map { _ in UInt8.random(in: 0...255) })

    /// A compact JWS with the given JSON claims and a random (unverifiable) signature.
    static func jwt(_ claimsJSON: String) -> String {
        "\(header).\(Base64URL.encode(Array(claimsJSON.utf8))).\(signature)"
    }

    /// `value` in the did:plc alphabet (base32, a–z and 2–7), left-padded with "a" to `width`.
    static func base32(_ value: Int, width: Int) -> String {
        let alphabet = Array("abcdefghijklmnopqrstuvwxyz234567")
        var digits: [Character] = []
        var rest = value
        repeat {
            digits.append(alphabet[rest % 32])
            rest /= 32
        } while rest > 0
        return String(repeating: "a", count: max(0, width - digits.count)) + String(digits.reversed())
    }
}
