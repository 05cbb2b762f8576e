import Crypto
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Writes an export file (`ExportFile`): into a private file beside the destination, which
/// appears at the destination only once complete and on disk (`link`, so never over a file
/// that is there). A writer abandoned or killed half way leaves no export, only its temporary
/// file, named `<destination>.new-…`.
public final class ExportFileWriter {
    private let destination: String
    private let temporary: String
    private let fd: Int32
    private let key: SymmetricKey
    private let header: [UInt8]
    private var index: UInt64 = 0
    private var summary = ExportedSummary(accounts: 0, clientKeys: 0, nonces: 0)

    public init(creating destination: String, storeKey: SymmetricKey) throws(ExportFileError) {
        guard access(destination, F_OK) != 0 else { throw .exists(path: destination) }
        self.destination = destination
        temporary = "\(destination).new-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { throw .unwritable(path: destination, reason: String(cString: strerror(errno))) }
        key = ExportFile.exportKey(storeKey)
        header = ExportFile.header(key)
        do {
            try writeAll(header)
        } catch {
            abandon()
            throw error
        }
    }

    /// The client keys and nonces: the first part.
    public func write(_ extras: RegistryExtras) throws(ExportFileError) {
        summary.clientKeys = extras.clientKeys.count
        summary.nonces = extras.nonces.count
        try part(.extras, ExportedExtras(extras))
    }

    public func write(_ accounts: [PortableAccount]) throws(ExportFileError) {
        summary.accounts += accounts.count
        try part(.accounts, accounts.map(ExportedAccount.init))
    }

    /// The last part, then the file in place. Returns the destination.
    @discardableResult
    public func finish() throws(ExportFileError) -> String {
        try part(.end, summary)
        guard fsync(fd) == 0 else {
            let reason = String(cString: strerror(errno))
            abandon()
            throw .unwritable(path: destination, reason: "fsync: \(reason)")
        }
        close(fd)
        defer { unlink(temporary) }
        guard link(temporary, destination) == 0 else {
            throw errno == EEXIST ? .exists(path: destination)
                : .unwritable(path: destination, reason: String(cString: strerror(errno)))
        }
        let directory = (destination as NSString).deletingLastPathComponent
        PrivateFiles.syncDirectory(directory.isEmpty ? "." : directory)
        return destination
    }

    /// Drops what was written: no export appears.
    public func abandon() {
        close(fd)
        unlink(temporary)
    }

    private func part<T: Encodable>(_ kind: ExportFile.PartKind, _ value: T) throws(ExportFileError) {
        let plaintext: Data
        do {
            plaintext = try ExportFile.encoder.encode(value)
        } catch {
            throw .unwritable(path: destination, reason: "encoding part \(index): \(error)")
        }
        let additional = ExportFile.additionalData(header: header, index: index, kind: kind)
        guard let sealed = try? AES.GCM.seal(plaintext, using: key, authenticating: additional).combined,
              sealed.count <= ExportFile.maximumPartLength else {
            throw .unwritable(path: destination, reason: "sealing part \(index)")
        }
        var frame = [kind.rawValue]
        withUnsafeBytes(of: UInt32(sealed.count).bigEndian) { frame.append(contentsOf: $0) }
        try writeAll(frame)
        try writeAll(Array(sealed))
        index += 1
    }

    private func writeAll(_ bytes: [UInt8]) throws(ExportFileError) {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            if written < 0 {
                if errno == EINTR { continue }
                throw .unwritable(path: destination, reason: String(cString: strerror(errno)))
            }
            offset += written
        }
    }
}
