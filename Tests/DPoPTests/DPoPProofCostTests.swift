import Crypto
import DPoP
import Foundation
import Testing

@Suite("DPoP proof cost")
struct DPoPProofCostTests {
    /// The target: one proof costs at most 1.5x one raw P-256 signature. Proofs and bare
    /// signatures are timed in alternating batches, and the medians of the batches compared, so
    /// that load from other processes hits both sides alike.
    #if DEBUG
    static let optimized = false
    #else
    static let optimized = true
    #endif

    @Test("a proof costs at most 1.5x a raw P-256 signature of the same size",
          .enabled(if: optimized, "unoptimized Swift says nothing about the product's cost: run with swift test -c release"))
    func proofCost() throws {
        let key = DPoPKey.generate()
        let signer = DPoPSigner(key: key)
        let request = try DPoPRequest.resource(method: "GET", url: "https://pds.example.com/xrpc/app.bsky.feed.getTimeline",
                                               accessToken: String(repeating: "t", count: 600))
        let sample = try signer.proof(for: request, nonce: "nonce-abcdefghijklmnop")
        // The bare signature signs as many bytes as a proof's signing input.
        let input = Array(sample.split(separator: ".").prefix(2).joined(separator: ".").utf8)
        let clock = ContinuousClock()
        var proofBatches: [Duration] = []
        var signatureBatches: [Duration] = []
        let batch = 40
        for _ in 0..<15 {
            signatureBatches.append(try clock.measure {
                for _ in 0..<batch { _ = try key.privateKey.signature(for: input) }
            })
            proofBatches.append(try clock.measure {
                for _ in 0..<batch { _ = try signer.proof(for: request, nonce: "nonce-abcdefghijklmnop") }
            })
        }
        let proofMedian = proofBatches.sorted()[proofBatches.count / 2]
        let signatureMedian = signatureBatches.sorted()[signatureBatches.count / 2]
        let ratio = proofMedian / signatureMedian
        print("DPoP proof: \(proofMedian / batch) per proof, \(signatureMedian / batch) per raw signature, ratio \(ratio)")
        #expect(ratio <= 1.5, "a proof costs \(ratio)x a raw signature")
    }
}
