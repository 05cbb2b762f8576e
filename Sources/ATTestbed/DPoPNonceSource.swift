import Crypto
import Foundation
import Synchronization
import WebBasics

/// One server's DPoP nonces (the authorization server and the PDS each have their own).
///
/// Nonces are derived from a secret and the rotation window the testbed clock is in, so they
/// rotate every `period` without a timer; the previous, current and next window's nonces are
/// accepted, as on the reference server, so a nonce lives two to three periods.
///
/// With `churn` on (a misbehaviour), every response gets a brand-new random nonce and only the
/// latest one issued is accepted: a client must take the nonce of every response.
final class DPoPNonceSource: Sendable {
    private let secret = SymmetricKey(size: .bits256)
    private let period: Double
    private let clock: TestbedClock
    private let churn = Atomic<Bool>(false)
    /// The latest nonce issued in churn mode.
    private let latestChurned = Mutex<String?>(nil)

    init(period: Duration, clock: TestbedClock) {
        self.period = max(1, period.seconds)
        self.clock = clock
    }

    var churnsEveryResponse: Bool {
        get { churn.load(ordering: .acquiring) }
        set {
            churn.store(newValue, ordering: .releasing)
            if !newValue { latestChurned.withLock { $0 = nil } }
        }
    }

    /// The nonce to send in this response's `DPoP-Nonce`.
    func issue() -> String {
        guard churnsEveryResponse else { return nonce(window: currentWindow()) }
        let fresh = Encodings.randomToken()
        latestChurned.withLock { $0 = fresh }
        return fresh
    }

    /// The nonces a proof may carry right now.
    func accepted() -> Set<String> {
        if churnsEveryResponse {
            return latestChurned.withLock { $0.map { [$0] } ?? [] }
        }
        let window = currentWindow()
        return [nonce(window: window - 1), nonce(window: window), nonce(window: window + 1)]
    }

    private func currentWindow() -> Int64 {
        Int64((clock.now().timeIntervalSince1970 / period).rounded(.down))
    }

    private func nonce(window: Int64) -> String {
        let code = HMAC<SHA256>.authenticationCode(for: withUnsafeBytes(of: window.bigEndian) { Array($0) }, using: secret)
        return Base64URL.encode(Array(code).prefix(18))
    }
}
