import Foundation
import Synchronization

/// Generates record keys as TIDs: 53 bits of microseconds since the epoch and 10 bits of clock
/// id, written in base32-sortable so string order is time order. Strictly increasing.
final class TIDGenerator: Sendable {
    private let lastMicroseconds = Mutex<UInt64>(0)
    private let clockID = UInt64.random(in: 0..<1024)

    func next(now: Date) -> String {
        let wanted = UInt64(max(0, now.timeIntervalSince1970 * 1_000_000))
        let micros = lastMicroseconds.withLock { last in
            last = max(wanted, last + 1)
            return last
        }
        return Self.encode((micros & ((1 << 53) - 1)) << 10 | clockID)
    }

    static func encode(_ value: UInt64) -> String {
        var characters: [UInt8] = []
        characters.reserveCapacity(13)
        for index in 0..<13 {
            let shift = UInt64(60 - 5 * index)
            characters.append(Encodings.sortableBase32Alphabet[Int((value >> shift) & 31)])
        }
        return String(decoding: characters, as: UTF8.self)
    }
}
