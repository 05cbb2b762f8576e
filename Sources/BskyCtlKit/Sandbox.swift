import FoundationEssentials
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `bskyctl exec --sandbox`: the program under bubblewrap, on an allow-list of the file system.
///
/// Hiding blueskyd's own files is not enough: whatever the user's uid can reach outside is a way
/// out (a tmux or screen server's socket in /tmp runs commands outside; a writable `~/.bashrc`
/// runs them at the next login; the D-Bus session bus starts units). So the program sees only
/// the system's read-only parts (`/usr`, `/etc`, `/opt` and the links into `/usr`), its working
/// directory read-only, the directories named with `--writable` (read-write) or `--readable`,
/// a private `/tmp`, and its own socket. It has no network (no loopback gateway, no abstract
/// sockets), its own PID, IPC and UTS namespaces (no `/proc/<daemon>`, no ptrace), a new
/// session (no TIOCSTI into the terminal), and, run as root, no capabilities (no umount).
/// Directories blueskyd names (its sockets, token file and state) are hidden even inside those.
/// With socat installed, the sandbox's own loopback carries the gateway (127.0.0.1:9583) to the
/// program's socket, so that a program needs only `ATPROTO_PDS_URL`.
enum Sandbox {
    struct Paths {
        var writable: [String] = []
        var readable: [String] = []
    }

    static func arguments(_ program: [String], socket: String, hidden: [String], paths: Paths,
                          environment: [String: String],
                          workingDirectory: String = FileManager.default.currentDirectoryPath) throws(CtlFailure) -> [String] {
        guard let bwrap = executable("bwrap", path: environment["PATH"]) else {
            throw CtlFailure.requestFailed("--sandbox needs bubblewrap: install it (apt-get install bubblewrap)")
        }
        var arguments = [bwrap]
        // The system, read-only; merged-/usr links as links.
        for system in ["/usr", "/etc", "/opt", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"] {
            if let target = try? FileManager.default.destinationOfSymbolicLink(atPath: system) {
                arguments += ["--symlink", target, system]
            } else if isDirectory(system) {
                arguments += ["--ro-bind", system, system]
            }
        }
        arguments += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
        // A working directory that holds what the sandbox hides (/, /run, the home, the runtime
        // directory) is not shown: the program starts at / instead.
        let broad = ["/", "/run", "/tmp", "/var", "/home", environment["HOME"], environment["XDG_RUNTIME_DIR"]].compactMap { $0 }
            .filter { !$0.isEmpty }.map(standardised)
        let workingDirectory = broad.contains { isUnder($0, any: [standardised(workingDirectory)]) } ? "/" : standardised(workingDirectory)
        var shown: [String] = []
        for path in (workingDirectory == "/" ? [] : [workingDirectory]) + paths.readable.map(absolute) where isDirectory(path) || FileManager.default.fileExists(atPath: path) {
            arguments += ["--ro-bind", path, path]
            shown.append(path)
        }
        for path in paths.writable.map(absolute) {
            guard FileManager.default.fileExists(atPath: path) else {
                throw CtlFailure.requestFailed("--writable \(path): no such file or directory")
            }
            arguments += ["--bind", path, path]
            shown.append(path)
        }
        // A program named by a path outside what is shown is shown alone, read-only.
        if program[0].contains("/") {
            let path = absolute(program[0])
            if !isUnder(path, any: shown + ["/usr", "/opt", "/etc"]) {
                arguments += ["--ro-bind", path, path]
            }
        }
        // blueskyd's own directories, wherever they fall within what is shown.
        for directory in Set(hidden.map(standardised)).sorted() where isDirectory(directory) && isUnder(directory, any: shown) {
            arguments += ["--tmpfs", directory]
        }
        let own = FilePath.directory(of: socket)
        arguments += ["--bind", own, own, "--chdir", workingDirectory, "--unshare-all", "--die-with-parent", "--new-session"]
        if geteuid() == 0 { arguments += ["--cap-drop", "ALL"] }
        guard let socat = bridge(environment: environment) else { return arguments + ["--"] + program }
        // socat forwards the sandbox's own 127.0.0.1:9583 to the program's socket; the program
        // starts once it listens (a bounded wait), and both end with the sandbox.
        let launcher = """
            \(socat) TCP-LISTEN:\(bridgePort),bind=127.0.0.1,reuseaddr,fork UNIX-CONNECT:"$0" 2>/dev/null &
            i=0
            until \(socat) -u OPEN:/dev/null TCP:127.0.0.1:\(bridgePort) 2>/dev/null; do
              i=$((i + 1)); [ "$i" -ge 250 ] && { echo "bskyctl exec --sandbox: the gateway's forwarder did not start" >&2; exit 70; }
              sleep 0.02
            done
            exec "$@"
            """
        return arguments + ["--", "/bin/sh", "-c", launcher, socket] + program
    }

    /// Where the forwarder listens inside the sandbox (a network of its own: no other user).
    static let bridgePort = 9583
    static var bridgeURL: String { "http://127.0.0.1:\(bridgePort)" }

    /// socat, which carries the sandbox's TCP to the program's socket; nil without it (the
    /// program then speaks HTTP over the Unix socket only).
    static func bridge(environment: [String: String]) -> String? {
        executable("socat", path: environment["PATH"])
    }

    static func absolute(_ path: String) -> String {
        standardised(path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path)
    }

    static func standardised(_ path: String) -> String { FilePath.standardised(path) }

    static func isUnder(_ path: String, any roots: [String]) -> Bool {
        roots.contains { root in path == root || path.hasPrefix(root.hasSuffix("/") ? root : root + "/") }
    }

    static func isDirectory(_ path: String) -> Bool {
        FilePath.isDirectory(path)
    }

    static func executable(_ name: String, path: String?) -> String? {
        for directory in (path ?? "/usr/bin:/bin").split(separator: ":") {
            let candidate = String(directory) + "/" + name
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        return nil
    }
}
