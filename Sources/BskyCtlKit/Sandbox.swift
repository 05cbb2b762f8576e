import Foundation

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
enum Sandbox {
    struct Paths {
        var writable: [String] = []
        var readable: [String] = []
    }

    static func arguments(_ program: [String], socket: String, hidden: [String], paths: Paths,
                          environment: [String: String]) throws(CtlFailure) -> [String] {
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
        let workingDirectory = FileManager.default.currentDirectoryPath
        var shown: [String] = []
        for path in [workingDirectory] + paths.readable.map(absolute) where isDirectory(path) || FileManager.default.fileExists(atPath: path) {
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
        let own = (socket as NSString).deletingLastPathComponent
        arguments += ["--bind", own, own, "--chdir", workingDirectory, "--unshare-all", "--die-with-parent", "--new-session"]
        if geteuid() == 0 { arguments += ["--cap-drop", "ALL"] }
        return arguments + ["--"] + program
    }

    static func absolute(_ path: String) -> String {
        standardised(path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path)
    }

    static func standardised(_ path: String) -> String { (path as NSString).standardizingPath }

    static func isUnder(_ path: String, any roots: [String]) -> Bool {
        roots.contains { root in path == root || path.hasPrefix(root.hasSuffix("/") ? root : root + "/") }
    }

    static func isDirectory(_ path: String) -> Bool {
        var isDirectory: ObjCBool = false
        return FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) && isDirectory.boolValue
    }

    static func executable(_ name: String, path: String?) -> String? {
        for directory in (path ?? "/usr/bin:/bin").split(separator: ":") {
            let candidate = String(directory) + "/" + name
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        return nil
    }
}
