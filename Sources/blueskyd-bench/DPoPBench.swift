import Crypto
import DPoP
import Foundation

/// Section 4: what a DPoP proof costs next to the P-256 signature inside it.
///
/// A proof is that signature plus a header (encoded once per key), the claims and base64url.
/// Both are timed in alternating batches of the same size, and the medians of the batches are
/// compared, so that load from other processes weighs on both sides alike.
struct DPoPBench {
    static let batch = 200
    static let rounds = 31

    func run() throws -> DPoPResult {
        let key = DPoPKey.generate()
        let signer = DPoPSigner(key: key)
        // A PDS call as the proxy signs it: `ath` over a token of a realistic length, a nonce.
        let request = try DPoPRequest.resource(
            method: "GET", url: "https://pds.example.com/xrpc/app.bsky.feed.getTimeline?limit=50",
            accessToken: String(repeating: "t", count: 600))
        let nonce = "nonce-0123456789abcdefghij"
        let sample = try signer.proof(for: request, nonce: nonce)
        // The bare signature signs as many bytes as a proof's signing input.
        let input = Array(sample.split(separator: ".").prefix(2).joined(separator: ".").utf8)
        let clock = ContinuousClock()
        var proofBatches: [Double] = []
        var signatureBatches: [Double] = []
        for round in 0..<Self.rounds {
            let proofs = {
                try clock.measure { for _ in 0..<Self.batch { _ = try signer.proof(for: request, nonce: nonce) } }
            }
            let signatures = {
                try clock.measure { for _ in 0..<Self.batch { _ = try key.privateKey.signature(for: input) } }
            }
            // ABBA: proof first on even rounds, signature first on odd ones.
            if round % 2 == 0 {
                proofBatches.append(try proofs().microseconds / Double(Self.batch))
                signatureBatches.append(try signatures().microseconds / Double(Self.batch))
            } else {
                signatureBatches.append(try signatures().microseconds / Double(Self.batch))
                proofBatches.append(try proofs().microseconds / Double(Self.batch))
            }
        }
        let proof = Statistics.median(proofBatches) ?? 0
        let signature = Statistics.median(signatureBatches) ?? 0
        return DPoPResult(batch: Self.batch, rounds: Self.rounds, proofMicroseconds: proof,
                          signatureMicroseconds: signature, ratio: signature > 0 ? proof / signature : 0,
                          proofBytes: sample.utf8.count)
    }
}

struct DPoPResult: Codable, Sendable {
    static let targetRatio = 1.5

    var batch: Int
    var rounds: Int
    /// Medians over the rounds of the mean time per operation in one batch.
    var proofMicroseconds: Double
    var signatureMicroseconds: Double
    var ratio: Double
    var proofBytes: Int

    var meetsTarget: Bool { ratio <= Self.targetRatio }
}

extension Duration {
    var microseconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) * 1e6 + Double(attoseconds) / 1e12
    }
}
