import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// POSIX helpers for files only the daemon's user may read.
package enum PrivateFiles {
    /// Creates `path` (and missing parents) with mode 0700, or tightens an existing
    /// directory to 0700, so the database and key never sit in a readable directory.
    package static func ensureDirectory(_ path: String) throws(StoreError) {
        var info = stat()
        if lstat(path, &info) == 0 {
            guard (info.st_mode & S_IFMT) == S_IFDIR else {
                throw StoreError.directory(path: path, reason: "exists and is not a directory")
            }
        } else {
            do {
                try FileManager.default.createDirectory(
                    atPath: path, withIntermediateDirectories: true,
                    attributes: [.posixPermissions: 0o700])
            } catch {
                throw StoreError.directory(path: path, reason: "\(error.localizedDescription)")
            }
        }
        guard chmod(path, 0o700) == 0 else {
            throw StoreError.directory(path: path, reason: "chmod 700 failed: \(errnoDescription())")
        }
    }

    /// Makes sure `path` exists with mode 0600 before SQLite opens it.
    ///
    /// SQLite gives the -wal and -shm files the same mode as the database file,
    /// so creating the database 0600 ourselves keeps all three private whatever the umask.
    package static func ensurePrivateFile(_ path: String) throws(StoreError) {
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else {
            throw StoreError.database(context: "creating \(path)", reason: errnoDescription())
        }
        defer { close(fd) }
        guard fchmod(fd, 0o600) == 0 else {
            throw StoreError.database(context: "securing \(path)", reason: errnoDescription())
        }
    }

    /// Tightens an existing file to 0600; a missing file is fine.
    package static func tightenIfPresent(_ path: String) throws(StoreError) {
        if chmod(path, 0o600) != 0 && errno != ENOENT {
            throw StoreError.database(context: "securing \(path)", reason: errnoDescription())
        }
    }

    /// The permission bits of `path`, or nil when it does not exist.
    package static func mode(of path: String) -> UInt32? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return UInt32(info.st_mode) & 0o7777
    }

    /// A new private file beside `path` holding `bytes`: created exclusively and not through a
    /// link, mode 0600 whatever the umask, synced. Returns its path; the caller publishes it
    /// (`rename` to replace `path`, `link` to create it only) and unlinks it either way. The
    /// error names the step that failed.
    package static func writeTemporary(beside path: String, _ bytes: UnsafeRawBufferPointer) throws(PrivateFileError) -> String {
        let temporaryPath = "\(path).new-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let fd = open(temporaryPath, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { throw PrivateFileError(reason: "creating \(temporaryPath): \(errnoDescription())") }
        let written = write(fd, bytes.baseAddress, bytes.count)
        let writeError = errno
        let synced = fchmod(fd, 0o600) == 0 && fsync(fd) == 0
        close(fd)
        guard written == bytes.count, synced else {
            unlink(temporaryPath)
            throw PrivateFileError(reason: "writing \(temporaryPath): \(errnoDescription(writeError))")
        }
        return temporaryPath
    }

    /// Replaces `path` with a private file holding `bytes`, atomically: a reader sees the old
    /// contents or the new, never part of them.
    package static func replace(_ path: String, with bytes: [UInt8]) throws(PrivateFileError) {
        let written = bytes.withUnsafeBytes { buffer in Result { () throws(PrivateFileError) in try writeTemporary(beside: path, buffer) } }
        let temporaryPath = try written.get()
        defer { unlink(temporaryPath) }
        guard rename(temporaryPath, path) == 0 else { throw PrivateFileError(reason: "replacing \(path): \(errnoDescription())") }
        syncDirectory(directory(of: path))
    }

    /// The directory a path names a file in: what comes before its last "/", "/" for a file
    /// at the root, "." for a bare name. (Foundation's `deletingLastPathComponent` traps on a
    /// one-character name, a blind attack found: `store export --to e`.)
    package static func directory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        let head = path[..<slash]
        return head.isEmpty ? "/" : String(head)
    }

    /// Flushes a directory entry (after creating or linking a file in it).
    package static func syncDirectory(_ path: String) {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return }
        _ = fsync(fd)
        close(fd)
    }
}

/// A private file that could not be written: the step and the system's reason.
package struct PrivateFileError: Error, CustomStringConvertible {
    package var reason: String
    package var description: String { reason }
}
