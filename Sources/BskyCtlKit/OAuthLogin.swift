import FoundationEssentials
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import JSONRPC

/// The OAuth side of `bskyctl login`: begin in the daemon, send the user to the browser (or ask
/// for the pasted redirect), wait, and cancel in the daemon on Ctrl-C or timeout.
struct OAuthLogin {
    let command: LoginCommand

    private var connection: ConnectionOptions { command.connection }

    func run() throws(CtlFailure) {
        let context = RequestContext(identifier: command.identifier)
        var params: [String: JSONValue] = ["identifier": .string(command.identifier)]
        if let scope = command.scope { params["scope"] = .string(scope) }
        if let upgrade = command.upgrade { params["account"] = .string(upgrade) }
        if command.makeDefault { params["makeDefault"] = true }
        // The handler is armed before the login starts, so no Ctrl-C after it is missed.
        let pending = PendingLogin()
        cancelOnInterrupt(pending)
        let started = try connection.connect().call("accounts.oauth.begin", .object(params), context: context)
        guard let loginID = started["loginID"]?.stringValue, let url = started["authorizationURL"]?.stringValue else {
            throw .requestFailed("blueskyd's accounts.oauth.begin reply lacks loginID or authorizationURL")
        }
        pending.set(loginID)

        let outcome: Result<JSONValue, RPCError>
        // A hosted client whose redirect is a web page: the browser cannot reach blueskyd, so the
        // user pastes the address it ends at, as with --no-browser.
        let pasteRedirect = command.noBrowser || started["redirectDelivery"]?.stringValue == "paste"
        if pasteRedirect {
            if command.noBrowser || !openInBrowser(url) {
                Console.printNote("Open this URL in a browser and approve the login:\n\n  \(url)\n")
            }
            let redirect = started["redirectURI"]?.stringValue.map { Self.withoutQuery($0) } ?? "the redirect page"
            Console.printNote("Then paste the address the browser ends up at (\(redirect)?…):")
            guard let pasted = readLine(strippingNewline: true), !pasted.trimmingSpaces().isEmpty else {
                cancel(loginID)
                throw .usage("no redirect URL pasted; the login was cancelled")
            }
            outcome = try connection.connect().callForResult(
                "accounts.oauth.complete", ["loginID": .string(loginID), "redirectURL": .string(pasted)])
        } else {
            if !openInBrowser(url) {
                Console.printNote("Open this URL in a browser and approve the login:\n\n  \(url)\n")
            }
            Console.printNote("Waiting for the login to be approved (up to \(Int(connection.timeout)) seconds; Ctrl-C cancels)…")
            // The reply comes when the browser's redirect arrives: wait a little longer than the daemon does.
            let waiting = try DaemonClient(socketPath: connection.socketPath, timeout: connection.timeout + 30)
            outcome = try waiting.callForResult("accounts.oauth.wait",
                                                ["loginID": .string(loginID), "timeoutSeconds": .number(connection.timeout)])
        }
        switch outcome {
        case .failure(let error):
            if error.catalogueName == .oauthLoginTimeout { cancel(loginID) }
            // Ctrl-C: the waiting call may end (cancelled) before the handler's own exit.
            if error.catalogueName == .oauthLoginCancelled { exit(130) }
            throw CtlFailure.from(error, context: context)
        case .success(let result):
            if command.output.json { return Console.printLine(result.prettyPrinted) }
            let account = try AccountSummary.fromResult(result)
            Console.printLine("Logged in as \(account.displayHandle) (\(account.did)), account \(account.id)")
        }
    }

    /// Ctrl-C: cancel the login in the daemon, then exit 130 as a shell expects. A plain signal
    /// handler (armed synchronously, unlike a dispatch source) wakes a thread through a pipe.
    private func cancelOnInterrupt(_ pending: PendingLogin) {
        InterruptPipe.install { [self] in
            Console.printNote("\nLogin cancelled.")
            if let loginID = pending.id { cancel(loginID) }
            exit(130)
        }
    }

    /// The redirect URI as the user will see it in the address bar, before the query.
    static func withoutQuery(_ uri: String) -> String {
        String(uri.prefix { $0 != "?" })
    }

    private func cancel(_ loginID: String) {
        _ = try? connection.connect().callForResult("accounts.oauth.cancel", ["loginID": .string(loginID)])
    }

    /// Opens `url` with xdg-open when a desktop session is there; false when it cannot.
    private func openInBrowser(_ url: String) -> Bool {
        let environment = ProcessInfo.processInfo.environment
        guard environment["DISPLAY"]?.isEmpty == false || environment["WAYLAND_DISPLAY"]?.isEmpty == false else { return false }
        let path = (environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":")
            .map { "\($0)/xdg-open" }
            .first { FileManager.default.isExecutableFile(atPath: $0) }
        guard let path else { return false }
        guard Self.spawnQuietly(path, arguments: [url]) else { return false }
        Console.printNote("Opened the login page in your browser. If nothing appeared, open:\n\n  \(url)\n")
        return true
    }

    /// Starts `path` with `arguments`, its output and errors going nowhere; not waited for
    /// (xdg-open returns at once, and bskyctl waits for the login, not for the browser).
    private static func spawnQuietly(_ path: String, arguments: [String]) -> Bool {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0)
        let argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        return posix_spawn(&pid, path, &actions, nil, argv, environ) == 0
    }
}

/// The login id, once `accounts.oauth.begin` answered, for the Ctrl-C handler's thread.
private final class PendingLogin: Sendable {
    private let value = Mutex<String?>(nil)

    var id: String? { value.withLock { $0 } }
    func set(_ id: String) { value.withLock { $0 = id } }
}

/// SIGINT → one byte in a pipe → `action` on its own thread (signal handlers may only write).
private enum InterruptPipe {
    nonisolated(unsafe) static var writeEnd: Int32 = -1

    static func install(_ action: @escaping @Sendable () -> Void) {
        var ends: [Int32] = [-1, -1]
        guard pipe(&ends) == 0 else { return }
        writeEnd = ends[1]
        let readEnd = ends[0]
        // A parent may have left SIGINT blocked (the mask survives exec): unblock it here, so
        // the handler runs on this thread or on the one started below (which inherits the mask).
        var unblock = sigset_t()
        sigemptyset(&unblock)
        sigaddset(&unblock, SIGINT)
        pthread_sigmask(SIG_UNBLOCK, &unblock, nil)
        signal(SIGINT) { _ in
            var byte: UInt8 = 1
            _ = write(InterruptPipe.writeEnd, &byte, 1)
        }
        let waiter = Waiter(readEnd: readEnd, action: action)
        var thread = pthread_t()
        _ = pthread_create(&thread, nil, { context in
            let waiter = Unmanaged<Waiter>.fromOpaque(context!).takeRetainedValue()
            var byte: UInt8 = 0
            while read(waiter.readEnd, &byte, 1) < 0 && errno == EINTR {}
            waiter.action()
            return nil
        }, Unmanaged.passRetained(waiter).toOpaque())
    }

    /// What the waiting thread needs, handed to it whole.
    private final class Waiter {
        let readEnd: Int32
        let action: @Sendable () -> Void
        init(readEnd: Int32, action: @escaping @Sendable () -> Void) {
            self.readEnd = readEnd
            self.action = action
        }
    }
}
