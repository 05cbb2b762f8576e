import Foundation

/// `bskyctl exec --sandbox`: the program under bubblewrap, left nothing of blueskyd's but its
/// own socket.
///
/// Without it a program of the same user can open the main sockets (served unrestricted), read
/// the token file, the store and its key, or attach to the daemon. Here: the directories of
/// the main sockets and the token file, the state directory (store and key), blueskyd's
/// configuration directory and the whole `$XDG_RUNTIME_DIR` (the D-Bus session bus, through
/// which `systemd-run --user` would start anything outside) are empty tmpfs; the program's own
/// socket directory is bound back; it has no network (no loopback gateway, no abstract
/// sockets) and its own process namespace (no `/proc/<daemon>`, no ptrace).
enum Sandbox {
    static func arguments(_ program: [String], socket: String, hidden: [String],
                          environment: [String: String]) throws(CtlFailure) -> [String] {
        guard let bwrap = executable("bwrap", path: environment["PATH"]) else {
            throw CtlFailure.requestFailed("--sandbox needs bubblewrap: install it (apt-get install bubblewrap)")
        }
        var directories = hidden
        if let runtime = environment["XDG_RUNTIME_DIR"], !runtime.isEmpty { directories.append(runtime) }
        let home = environment["HOME"] ?? NSHomeDirectory()
        let configuration = environment["XDG_CONFIG_HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? (home + "/.config")
        directories.append(configuration + "/blueskyd")
        var arguments = [bwrap, "--dev-bind", "/", "/"]
        // Only what exists: bwrap would make a missing mount point on the real file system.
        for directory in Set(directories.map(standardised)).sorted() where isDirectory(directory) {
            arguments += ["--tmpfs", directory]
        }
        let own = (socket as NSString).deletingLastPathComponent
        arguments += ["--bind", own, own, "--unshare-net", "--unshare-pid", "--proc", "/proc", "--die-with-parent",
                      "--new-session", "--"]
        return arguments + program
    }

    static func standardised(_ path: String) -> String { (path as NSString).standardizingPath }

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
