import Crypto
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Reads an export file (`ExportFile`) a part at a time, checking each: the header (an export,
/// a format this blueskyd reads, sealed with this key) when opened, then every part's seal, its
/// place and its kind, and at the end the counts. Any failure refuses the file; an import made
/// from it inside one step (`importRegistry`) then writes nothing.
public final class ExportFileReader: Sendable {
    /// One part, opened: where it was, its kind and its plaintext.
    private struct Part {
        var index: UInt64
        var kind: ExportFile.PartKind
        var body: Data
    }

    private struct State {
        var fd: Int32
        var index: UInt64 = 0
        var seen = ExportedSummary(accounts: 0, clientKeys: 0, nonces: 0)
        var ended = false
        /// A part read ahead (the first after the nonces).
        var pending: Part?
    }

    public let path: String
    private let key: SymmetricKey
    private let expectedKeyCheck: [UInt8]
    /// The file's own header (with its file id): every part's additional data.
    private let header: [UInt8]
    // Parts are read in sequence by one task; the lock makes the reader safe to hand to it.
    private let state: Mutex<State>

    public init(path: String, storeKey: SymmetricKey) throws(ExportFileError) {
        self.path = path
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw .unreadable(path: path, reason: String(cString: strerror(errno))) }
        key = ExportFile.exportKey(storeKey)
        expectedKeyCheck = ExportFile.keyCheck(key)
        state = Mutex(State(fd: fd))
        let found: [UInt8]
        do {
            found = try Self.read(fd, count: ExportFile.headerLength, path: path) ?? []
        } catch {
            Glibc.close(fd)
            throw error
        }
        header = found
        guard found.count == ExportFile.headerLength, Array(found.prefix(ExportFile.magic.count)) == ExportFile.magic else {
            close()
            throw .notAnExport(path: path)
        }
        let version = found[ExportFile.magic.count]
        guard version == ExportFile.formatVersion else {
            close()
            throw version > ExportFile.formatVersion ? .laterFormat(path: path, version: version) : .notAnExport(path: path)
        }
        guard Array(found.suffix(ExportFile.keyCheckLength)) == expectedKeyCheck else {
            close()
            throw .anotherKey(path: path)
        }
    }

    /// The client keys (the first part) and the nonces (the parts after it).
    public func extras() throws(ExportFileError) -> RegistryExtras {
        let first = try nextPart()
        guard first.kind == .clientKeys else { throw .damaged(path: path, part: first.index, reason: "a part out of place") }
        let keys: [ExportedClientKey] = try decode(first)
        var nonces: [StoredDPoPNonce] = []
        while true {
            let part = try nextPart()
            guard part.kind == .nonces else {
                state.withLock { $0.pending = part }
                break
            }
            let batch: [ExportedNonce] = try decode(part)
            nonces += batch.map(\.stored)
        }
        state.withLock { state in
            state.seen.clientKeys = keys.count
            state.seen.nonces = nonces.count
        }
        return RegistryExtras(clientKeys: keys.map(\.key), nonces: nonces)
    }

    /// The next part of accounts; nil at the end (whose counts must match what came before,
    /// and after which the file must end).
    public func nextAccounts() throws(ExportFileError) -> [PortableAccount]? {
        let part: Part
        if let pending = state.withLock({ $0.pending.take() }) { part = pending } else { part = try nextPart() }
        switch part.kind {
        case .accounts:
            let accounts: [ExportedAccount] = try decode(part)
            state.withLock { $0.seen.accounts += accounts.count }
            return accounts.map(\.portable)
        case .end:
            let summary: ExportedSummary = try decode(part)
            let (seen, fd) = state.withLock { state in
                state.ended = true
                return (state.seen, state.fd)
            }
            guard try Self.read(fd, count: 1, path: path) == nil else {
                throw .damaged(path: path, part: part.index + 1, reason: "bytes after the last part")
            }
            guard summary == seen else {
                throw .damaged(path: path, part: part.index,
                               reason: "it says \(summary.accounts) accounts, \(summary.clientKeys) client keys and "
                                   + "\(summary.nonces) nonces; \(seen.accounts), \(seen.clientKeys) and \(seen.nonces) came")
            }
            return nil
        case .clientKeys, .nonces:
            throw .damaged(path: path, part: part.index, reason: "a part out of place")
        }
    }

    public func close() {
        state.withLock { state in
            if state.fd >= 0 { Glibc.close(state.fd) }
            state.fd = -1
        }
    }

    deinit { close() }

    /// The next part, opened. The end of the file before the last part is "cut short";
    /// anything that does not open is "damaged".
    private func nextPart() throws(ExportFileError) -> Part {
        let (fd, index, ended) = state.withLock { ($0.fd, $0.index, $0.ended) }
        guard !ended else { throw .damaged(path: path, part: index, reason: "a part after the last") }
        guard let frame = try Self.read(fd, count: 5, path: path), frame.count == 5 else { throw .cutShort(path: path) }
        guard let kind = ExportFile.PartKind(rawValue: frame[0]) else {
            throw .damaged(path: path, part: index, reason: "an unknown kind of part")
        }
        let length = Int(UInt32(frame[1]) << 24 | UInt32(frame[2]) << 16 | UInt32(frame[3]) << 8 | UInt32(frame[4]))
        guard length <= ExportFile.maximumPartLength else { throw .damaged(path: path, part: index, reason: "a length of \(length) bytes") }
        guard let sealed = try Self.read(fd, count: length, path: path), sealed.count == length else { throw .cutShort(path: path) }
        let additional = ExportFile.additionalData(header: header, index: index, kind: kind)
        guard let box = try? AES.GCM.SealedBox(combined: sealed),
              let plaintext = try? AES.GCM.open(box, using: key, authenticating: additional) else {
            throw .damaged(path: path, part: index, reason: "it does not open (changed, or taken from another place or file)")
        }
        state.withLock { $0.index += 1 }
        return Part(index: index, kind: kind, body: plaintext)
    }

    private func decode<T: Decodable>(_ part: Part) throws(ExportFileError) -> T {
        do {
            return try JSONDecoder().decode(T.self, from: part.body)
        } catch {
            throw .damaged(path: path, part: part.index, reason: "its contents do not read: \(error)")
        }
    }

    /// Up to `count` bytes; nil at the end of the file (nothing read).
    private static func read(_ fd: Int32, count: Int, path: String) throws(ExportFileError) -> [UInt8]? {
        var bytes = [UInt8](repeating: 0, count: count)
        var filled = 0
        while filled < count {
            let got = bytes[filled...].withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if got < 0 {
                if errno == EINTR { continue }
                throw .unreadable(path: path, reason: String(cString: strerror(errno)))
            }
            if got == 0 { break }
            filled += got
        }
        return filled == 0 && count > 0 ? nil : Array(bytes.prefix(filled))
    }
}
