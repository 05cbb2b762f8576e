#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Creating, checking and removing the socket file safely.
package enum SocketFile {
    /// Identifies one socket file, so shutdown removes only the file this server created.
    package struct Identity: Hashable, Sendable {
        package var device: UInt64
        package var inode: UInt64
    }

    /// Makes sure the socket's directory exists (creating it 0700) and nobody else can write it.
    package static func prepareDirectory(for socketPath: String) throws {
        let directory = parentDirectory(of: socketPath)
        if mkdir(directory, 0o700) == 0 {
            // The umask may have cleared bits, never added any; make the mode exact anyway.
            guard chmod(directory, 0o700) == 0 else { throw failure(directory, "chmod", errno) }
        } else if errno != EEXIST {
            throw failure(directory, "mkdir", errno)
        }
        var info = stat()
        guard stat(directory, &info) == 0 else { throw failure(directory, "stat", errno) }
        guard info.st_mode & S_IFMT == S_IFDIR else {
            throw RPCServerError.insecureDirectory(path: directory, reason: "it is not a directory")
        }
        guard info.st_uid == geteuid() else {
            throw RPCServerError.insecureDirectory(
                path: directory, reason: "it is owned by uid \(info.st_uid), not by uid \(geteuid())")
        }
        guard info.st_mode & 0o022 == 0 else {
            throw RPCServerError.insecureDirectory(
                path: directory,
                reason: "it is writable by group or others (mode \(String(info.st_mode & 0o7777, radix: 8))); chmod 700 it")
        }
    }

    /// Clears the way for binding: throws when a live server answers at `path`, removes a
    /// stale socket nobody listens on, and leaves anything that is not a socket alone.
    package static func removeStaleSocket(at path: String) throws {
        var info = stat()
        guard lstat(path, &info) == 0 else {
            if errno == ENOENT { return }
            throw failure(path, "lstat", errno)
        }
        guard info.st_mode & S_IFMT == S_IFSOCK else { throw RPCServerError.notASocket(path) }
        switch probe(path) {
        case 0:
            throw RPCServerError.alreadyInUse(path)
        case ECONNREFUSED:
            guard unlink(path) == 0 || errno == ENOENT else { throw failure(path, "unlink", errno) }
        case let code:
            throw failure(path, "connect to", code)
        }
    }

    /// Restricts the freshly bound socket to its owner. The 0700 directory already keeps
    /// others out during the moment between bind and chmod (a process-wide umask change
    /// would race with files other threads create).
    package static func restrictToOwner(_ path: String) throws {
        guard chmod(path, 0o600) == 0 else { throw failure(path, "chmod", errno) }
    }

    package static func identity(of path: String) -> Identity? {
        var info = stat()
        guard lstat(path, &info) == 0 else { return nil }
        return Identity(device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
    }

    /// Removes the socket file if it is still the one this server bound.
    package static func remove(_ path: String, ifStill identity: Identity) {
        guard self.identity(of: path) == identity else { return }
        unlink(path)
    }

    package static func checkLength(_ path: String) throws {
        guard path.utf8.count < MemoryLayout.size(ofValue: sockaddr_un().sun_path) else {
            throw RPCServerError.pathTooLong(path)
        }
    }

    /// Connects to `path` and hangs up: 0 when something is listening, else the errno.
    private static func probe(_ path: String) -> Int32 {
        #if canImport(Glibc)
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        #else
        let fd = socket(AF_UNIX, SOCK_STREAM, 0)
        #endif
        guard fd >= 0 else { return errno }
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8)) }
        let result = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        return result == 0 ? 0 : errno
    }

    private static func parentDirectory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    private static func failure(_ path: String, _ operation: String, _ code: Int32) -> RPCServerError {
        .systemCallFailed(path: path, operation: operation, errno: code)
    }
}
