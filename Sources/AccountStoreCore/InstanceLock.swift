import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// An exclusive `flock` on the state directory's lock file, held until
/// `release()`, deinit, or process exit.
///
/// flock locks belong to the open file description, so a second open of the
/// same file (even in this process) conflicts; the descriptor is close-on-exec
/// so child processes do not keep the lock alive.
public final class InstanceLock: @unchecked Sendable {
    /// The lock file's path.
    public let path: String
    private let mutex = NSLock()
    // Guarded by `mutex`; -1 once released.
    private var descriptor: Int32

    init(path: String, directory: String) throws {
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else {
            throw StoreError.lockFailed(path: path, reason: errnoDescription())
        }
        while flock(fd, LOCK_EX | LOCK_NB) != 0 {
            let code = errno
            if code == EINTR { continue }
            let holder = code == EWOULDBLOCK ? Self.readPID(fd) : nil
            close(fd)
            if code == EWOULDBLOCK {
                throw StoreError.alreadyRunning(pid: holder, directory: directory)
            }
            throw StoreError.lockFailed(path: path, reason: errnoDescription(code))
        }
        // Record who holds it, for the next instance's error message.
        let pidText = Array("\(getpid())\n".utf8)
        if ftruncate(fd, 0) != 0 || pwrite(fd, pidText, pidText.count, 0) != pidText.count {
            let reason = errnoDescription()
            close(fd)
            throw StoreError.lockFailed(path: path, reason: "writing the pid: \(reason)")
        }
        self.path = path
        self.descriptor = fd
    }

    deinit {
        release()
    }

    /// Whether this object still holds the lock.
    public var isHeld: Bool {
        mutex.withLock { descriptor >= 0 }
    }

    /// Releases the lock. The file stays (removing it would race with a new
    /// instance locking a fresh file of the same name).
    public func release() {
        mutex.withLock {
            guard descriptor >= 0 else { return }
            flock(descriptor, LOCK_UN)
            close(descriptor)
            descriptor = -1
        }
    }

    private static func readPID(_ fd: Int32) -> Int32? {
        var buffer = [UInt8](repeating: 0, count: 32)
        let count = pread(fd, &buffer, buffer.count, 0)
        guard count > 0 else { return nil }
        let text = String(decoding: buffer[0..<count], as: UTF8.self)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        return Int32(text)
    }
}
