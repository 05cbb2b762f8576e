import Crypto
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Writes an export file (`ExportFile`): into a private file beside the destination, which
/// appears at the destination only once complete and on disk, never over a file that is there
/// (`link`, or on a file system without links, such as a FAT stick, a rename over a placeholder
/// created exclusively). A writer abandoned or killed half way leaves no export, only its
/// temporary file, named `<destination>.new-…`.
public final class ExportFileWriter: Sendable {
    /// What changes as the file is written. A writer is used by one task at a time; the lock
    /// lets that task hand its blocking writes to another thread.
    private struct State {
        /// -1 once closed: closing a number twice could close a descriptor opened since.
        var fd: Int32
        var index: UInt64 = 0
        var summary = ExportedSummary(accounts: 0, clientKeys: 0, nonces: 0)
    }

    private let destination: String
    private let temporary: String
    private let key: SymmetricKey
    private let header: [UInt8]
    private let state: Mutex<State>

    public init(creating destination: String, storeKey: SymmetricKey) throws(ExportFileError) {
        guard access(destination, F_OK) != 0 else { throw .exists(path: destination) }
        self.destination = destination
        temporary = "\(destination).new-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { throw .unwritable(path: destination, reason: String(cString: strerror(errno))) }
        key = ExportFile.exportKey(storeKey)
        header = ExportFile.header(key, fileID: (0..<ExportFile.fileIDLength).map { _ in UInt8.random(in: 0...255) })
        state = Mutex(State(fd: fd))
        do {
            try state.withLock { state throws(ExportFileError) in try writeAll(header, to: state.fd) }
        } catch {
            abandon()
            throw error
        }
    }

    /// The client keys (the first part), then the nonces, `ExportFile.partSize` a part.
    public func write(_ extras: RegistryExtras) throws(ExportFileError) {
        try state.withLock { state throws(ExportFileError) in
            state.summary.clientKeys = extras.clientKeys.count
            state.summary.nonces = extras.nonces.count
            try part(.clientKeys, extras.clientKeys.map(ExportedClientKey.init), &state)
            for start in stride(from: 0, to: extras.nonces.count, by: ExportFile.partSize) {
                let nonces = extras.nonces[start..<min(start + ExportFile.partSize, extras.nonces.count)]
                try part(.nonces, nonces.map(ExportedNonce.init), &state)
            }
        }
    }

    public func write(_ accounts: [PortableAccount]) throws(ExportFileError) {
        try state.withLock { state throws(ExportFileError) in
            state.summary.accounts += accounts.count
            try part(.accounts, accounts.map(ExportedAccount.init), &state)
        }
    }

    /// The last part, then the file in place. Returns the destination.
    @discardableResult
    public func finish() throws(ExportFileError) -> String {
        let synced = try state.withLock { state throws(ExportFileError) -> Bool in
            try part(.end, state.summary, &state)
            return fsync(state.fd) == 0
        }
        guard synced else {
            let reason = String(cString: strerror(errno))
            abandon()
            throw .unwritable(path: destination, reason: "fsync: \(reason)")
        }
        closeFile()
        try publish()
        PrivateFiles.syncDirectory(PrivateFiles.directory(of: destination))
        return destination
    }

    /// Drops what was written: no export appears.
    public func abandon() {
        closeFile()
        unlink(temporary)
    }

    deinit { closeFile() }

    private func closeFile() {
        state.withLock { state in
            if state.fd >= 0 { close(state.fd) }
            state.fd = -1
        }
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

    private func part<T: Encodable>(_ kind: ExportFile.PartKind, _ value: T, _ state: inout State) throws(ExportFileError) {
        let plaintext: Data
        do {
            plaintext = try ExportFile.encoder.encode(value)
        } catch {
            throw .unwritable(path: destination, reason: "encoding part \(state.index): \(error)")
        }
        let additional = ExportFile.additionalData(header: header, index: state.index, kind: kind)
        guard let sealed = try? AES.GCM.seal(plaintext, using: key, authenticating: additional).combined,
              sealed.count <= ExportFile.maximumPartLength else {
            throw .unwritable(path: destination, reason: "sealing part \(state.index)")
        }
        var frame = [kind.rawValue]
        withUnsafeBytes(of: UInt32(sealed.count).bigEndian) { frame.append(contentsOf: $0) }
        try writeAll(frame, to: state.fd)
        try writeAll(Array(sealed), to: state.fd)
        state.index += 1
    }

    private func writeAll(_ bytes: [UInt8], to fd: Int32) throws(ExportFileError) {
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
