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
    private struct State {
        var fd: Int32
        var index: UInt64 = 0
        var seen = ExportedSummary(accounts: 0, clientKeys: 0, nonces: 0)
        var ended = false
    }

    public let path: String
    private let key: SymmetricKey
    private let header: [UInt8]
    private let state: Mutex<State>

    public init(path: String, storeKey: SymmetricKey) throws(ExportFileError) {
        self.path = path
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw .unreadable(path: path, reason: String(cString: strerror(errno))) }
        key = ExportFile.exportKey(storeKey)
        header = ExportFile.header(key)
        state = Mutex(State(fd: fd))
        let found: [UInt8]
        do {
            found = try Self.read(fd, count: ExportFile.headerLength, path: path) ?? []
        } catch {
            close()
            throw error
        }
        guard found.count == ExportFile.headerLength, Array(found.prefix(ExportFile.magic.count)) == ExportFile.magic else {
            close()
            throw .notAnExport(path: path)
        }
        let version = found[ExportFile.magic.count]
        guard version == ExportFile.formatVersion else {
            close()
            throw version > ExportFile.formatVersion ? .laterFormat(path: path, version: version) : .notAnExport(path: path)
        }
        guard found == header else {
            close()
            throw .anotherKey(path: path)
        }
    }

    /// The client keys and nonces (the first part).
    public func extras() throws(ExportFileError) -> RegistryExtras {
        let extras: ExportedExtras = try part(.extras)
        return extras.extras
    }

    /// The next part of accounts; nil at the end (whose counts must match what came before).
    public func nextAccounts() throws(ExportFileError) -> [PortableAccount]? {
        let (kind, body) = try nextPart()
        switch kind {
        case .accounts:
            let accounts: [ExportedAccount] = try decode(body, index: currentIndex - 1)
            state.withLock { $0.seen.accounts += accounts.count }
            return accounts.map(\.portable)
        case .end:
            let summary: ExportedSummary = try decode(body, index: currentIndex - 1)
            let seen = state.withLock { state in
                state.ended = true
                return state.seen
            }
            let fd = state.withLock { $0.fd }
            guard try Self.read(fd, count: 1, path: path) == nil else {
                throw .damaged(path: path, part: currentIndex, reason: "bytes after the last part")
            }
            guard summary == seen else {
                throw .damaged(path: path, part: currentIndex - 1,
                               reason: "it says \(summary.accounts) accounts, \(summary.clientKeys) client keys and "
                                   + "\(summary.nonces) nonces; \(seen.accounts), \(seen.clientKeys) and \(seen.nonces) came")
            }
            return nil
        case .extras:
            throw .damaged(path: path, part: currentIndex - 1, reason: "client keys where accounts belong")
        }
    }

    public func close() {
        state.withLock { state in
            if state.fd >= 0 { Glibc.close(state.fd) }
            state.fd = -1
        }
    }

    deinit { close() }

    private var currentIndex: UInt64 { state.withLock { $0.index } }

    private func part<T: Decodable>(_ expected: ExportFile.PartKind) throws(ExportFileError) -> T {
        let (kind, body) = try nextPart()
        guard kind == expected else { throw .damaged(path: path, part: currentIndex - 1, reason: "a part out of place") }
        let value: T = try decode(body, index: currentIndex - 1)
        if let extras = value as? ExportedExtras {
            state.withLock { $0.seen.clientKeys = extras.clientKeys.count; $0.seen.nonces = extras.nonces.count }
        }
        return value
    }

    /// The next part, opened: its kind and plaintext. The end of the file before the last
    /// part is "cut short"; anything that does not open is "damaged".
    private func nextPart() throws(ExportFileError) -> (ExportFile.PartKind, Data) {
        let (fd, index, ended) = state.withLock { ($0.fd, $0.index, $0.ended) }
        guard !ended else { throw .damaged(path: path, part: index, reason: "a part after the last") }
        guard let frame = try Self.read(fd, count: 5, path: path) else { throw .cutShort(path: path) }
        guard frame.count == 5, let kind = ExportFile.PartKind(rawValue: frame[0]) else {
            throw frame.count < 5 ? .cutShort(path: path) : .damaged(path: path, part: index, reason: "an unknown kind of part")
        }
        let length = Int(UInt32(frame[1]) << 24 | UInt32(frame[2]) << 16 | UInt32(frame[3]) << 8 | UInt32(frame[4]))
        guard length <= ExportFile.maximumPartLength else { throw .damaged(path: path, part: index, reason: "a length of \(length) bytes") }
        guard let sealed = try Self.read(fd, count: length, path: path), sealed.count == length else { throw .cutShort(path: path) }
        let additional = ExportFile.additionalData(header: header, index: index, kind: kind)
        guard let box = try? AES.GCM.SealedBox(combined: sealed),
              let plaintext = try? AES.GCM.open(box, using: key, authenticating: additional) else {
            throw .damaged(path: path, part: index, reason: "it does not open (changed, or moved from elsewhere in a file)")
        }
        state.withLock { $0.index += 1 }
        return (kind, plaintext)
    }

    private func decode<T: Decodable>(_ body: Data, index: UInt64) throws(ExportFileError) -> T {
        do {
            return try JSONDecoder().decode(T.self, from: body)
        } catch {
            throw .damaged(path: path, part: index, reason: "its contents do not read: \(error)")
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
