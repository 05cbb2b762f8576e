import Foundation

/// Whether the configured store key is the one a store's rows were sealed with, judged at start
/// from its oldest rows (`AccountStore.verifyKey`).
///
/// One row is not enough: a row whose secrets someone swapped with another's, or damaged, does
/// not open under the right key either, and taking it for a wrong key stopped the host with
/// "put the original key back" (found by a blind attack). A row proves the key when its
/// secrets open or its metadata seal holds (both are keyed); the key is wrong only when none
/// of the rows sampled does either.
package struct StoreKeyCheck {
    /// How many of the oldest rows are tried: an intruder who damaged them all stops the host,
    /// as one who deleted them would; the error then says damage is possible.
    package static let sampleSize = 16

    /// One sampled row: its parse (nil for a store that read only the id), seal and secrets.
    package struct Sample: Sendable {
        package var id: UUID
        package var row: ParsedRow?
        package var seal: Data?
        package var blob: Data

        package init(id: UUID, row: ParsedRow?, seal: Data?, blob: Data) {
            self.id = id
            self.row = row
            self.seal = seal
            self.blob = blob
        }
    }

    let sealer: SecretSealer
    let tenant: String

    package init(sealer: SecretSealer, tenant: String) {
        self.sealer = sealer
        self.tenant = tenant
    }

    /// Throws `secretDoesNotOpen` naming the oldest row when no sampled row proves the key;
    /// returns when one does, or when there are none (a new store: nothing to check).
    package func verify(_ samples: [Sample]) throws(StoreError) {
        guard let oldest = samples.first else { return }
        for sample in samples where proves(sample) { return }
        throw StoreError.secretDoesNotOpen(account: oldest.id)
    }

    private func proves(_ sample: Sample) -> Bool {
        if case .readable(let record) = sample.row,
           [.holds, .olderVersion].contains(sealer.check(record, tenant: tenant, seal: sample.seal)) {
            return true
        }
        return (try? sealer.open(sample.blob, account: sample.id)) != nil
    }
}
