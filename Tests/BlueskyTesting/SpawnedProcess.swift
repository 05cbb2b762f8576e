import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A child process started with posix_spawn and reaped by us, for programs that close every
/// inherited file descriptor at start (dnsmasq does).
///
/// Foundation's `Process` learns that a child ended when a socket it shares with the child
/// closes; a child that closes it early sends Foundation's monitor thread into a blocking
/// `waitpid` for a process that is still running, and from then on no other `Process` in the
/// test run is ever reaped.
public final class SpawnedProcess: @unchecked Sendable {
    public let pid: pid_t
    private let lock = NSLock()
    private var exitStatus: Int32?

    /// Starts `executable` with `arguments`; stdin is /dev/null, stdout and stderr go to `outputFile`.
    public init(_ executable: String, _ arguments: [String], outputFile: String) throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, outputFile, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var child: pid_t = 0
        let result = posix_spawn(&child, executable, &actions, nil, argv, environ)
        guard result == 0 else {
            throw ProcessRunner.Failure.launchFailed(command: executable, reason: String(cString: strerror(result)))
        }
        pid = child
    }

    deinit { terminate() }

    /// True until the process has exited (and then it has been reaped).
    public var isRunning: Bool {
        lock.withLock {
            guard exitStatus == nil else { return false }
            var status: Int32 = 0
            if waitpid(pid, &status, WNOHANG) == pid { exitStatus = status }
            return exitStatus == nil
        }
    }

    /// SIGKILL, then reaps it; safe to call more than once.
    public func terminate() {
        lock.withLock {
            guard exitStatus == nil else { return }
            kill(pid, SIGKILL)
            var status: Int32 = 0
            while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
            exitStatus = status
        }
    }
}
