import FoundationEssentials
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Where blueskyd's Unix socket lives when nobody says otherwise.
///
/// The daemon and bskyctl share this one rule so that both find the same socket:
/// 1. `$BLUESKYD_SOCKET` when set and non-empty;
/// 2. else `$XDG_RUNTIME_DIR/blueskyd/blueskyd.sock` when `XDG_RUNTIME_DIR` is set and non-empty;
/// 3. else `/tmp/blueskyd-<uid>/blueskyd.sock`.
public enum SocketLocation {
    /// The environment variable that names the socket explicitly.
    public static let environmentVariable = "BLUESKYD_SOCKET"

    /// The socket's file name inside its directory.
    public static let socketFileName = "blueskyd.sock"

    /// The default socket path for `environment` and `uid` (the current process's by default).
    public static func defaultPath(
        environment: [String: String] = ProcessInfo.processInfo.environment,
        uid: UInt32 = UInt32(getuid())
    ) -> String {
        if let explicit = environment[environmentVariable], !explicit.isEmpty {
            return explicit
        }
        return defaultDirectory(environment: environment, uid: uid) + "/" + socketFileName
    }

    /// The directory the default socket lives in, ignoring `$BLUESKYD_SOCKET`
    /// (the daemon creates it with mode 0700).
    public static func defaultDirectory(
        environment: [String: String] = ProcessInfo.processInfo.environment,
        uid: UInt32 = UInt32(getuid())
    ) -> String {
        if let runtime = environment["XDG_RUNTIME_DIR"], !runtime.isEmpty {
            // A trailing slash in XDG_RUNTIME_DIR must not yield "//" in the path people see.
            let trimmed = runtime.hasSuffix("/") && runtime.count > 1 ? String(runtime.dropLast()) : runtime
            return trimmed + "/blueskyd"
        }
        return "/tmp/blueskyd-\(uid)"
    }
}
