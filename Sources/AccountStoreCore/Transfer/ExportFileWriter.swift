import Crypto
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Writes an export file (`ExportFile`): into a private file beside the destination, which
/// appears at the destination only once complete and on disk, never over a file that is there
/// (`link`, or on a file system without links, such as a FAT stick, a rename over a placeholder
/// created exclusively). A writer abandoned or killed half way leaves no export, only its
/// temporary file, named `<destination>.new-…`.
public final class ExportFileWriter {
    private let destination: String
    private let temporary: String
    /// -1 once closed: closing a number twice could close a descriptor opened since.
    private var fd: Int32
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
        header = ExportFile.header(key, fileID: (0..<ExportFile.fileIDLength).map { _ in UInt8.random(in: 0...255) })
        do {
            try writeAll(header)
        } catch {
            abandon()
            throw error
        }
    }

    /// The client keys (the first part), then the nonces, `ExportFile.partSize` a part.
    public func write(_ extras: RegistryExtras) throws(ExportFileError) {
        summary.clientKeys = extras.clientKeys.count
        summary.nonces = extras.nonces.count
        try part(.clientKeys, extras.clientKeys.map(ExportedClientKey.init))
        for start in stride(from: 0, to: extras.nonces.count, by: ExportFile.partSize) {
            try part(.nonces, extras.nonces[start..<min(start + ExportFile.partSize, extras.nonces.count)].map(ExportedNonce.init))
        }
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
        closeFile()
        try publish()
        let directory = (destination as NSString).deletingLastPathComponent
        PrivateFiles.syncDirectory(directory.isEmpty ? "." : directory)
        return destination
    }

    /// Drops what was written: no export appears.
    public func abandon() {
        closeFile()
        unlink(temporary)
    }

    deinit { closeFile() }

    private func closeFile() {
        if fd >= 0 { close(fd) }
        fd = -1
    }

    /// The temporary file at the destination, never over an existing file.
    private func publish() throws(ExportFileError) {
        if link(temporary, destination) == 0 {
            unlink(temporary)
            return
        }
        let linkError = errno
        guard linkError != EEXIST else {
            unlink(temporary)
            throw .exists(path: destination)
        }
        // No hard links here (FAT, exFAT): the name taken first (exclusively, so never over a
        // file someone made meanwhile), then the export renamed over that placeholder. A kill
        // in between leaves an empty file there, which an import refuses as not an export.
        let placeholder = open(destination, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard placeholder >= 0 else {
            let reason = errno == EEXIST ? nil : String(cString: strerror(errno))
            unlink(temporary)
            throw reason.map { .unwritable(path: destination, reason: "link: \(String(cString: strerror(linkError))); \($0)") }
                ?? .exists(path: destination)
        }
        close(placeholder)
        guard rename(temporary, destination) == 0 else {
            let reason = String(cString: strerror(errno))
            unlink(destination)
            unlink(temporary)
            throw .unwritable(path: destination, reason: "rename: \(reason)")
        }
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
