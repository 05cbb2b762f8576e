import Dispatch
import Foundation
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
        let started = try connection.connect().call("accounts.oauth.begin", .object(params), context: context)
        guard let loginID = started["loginID"]?.stringValue, let url = started["authorizationURL"]?.stringValue else {
            throw .requestFailed("blueskyd's accounts.oauth.begin reply lacks loginID or authorizationURL")
        }
        let interrupt = cancelOnInterrupt(loginID)
        defer { interrupt.cancel() }

        let outcome: Result<JSONValue, RPCError>
        if command.noBrowser {
            Console.printNote("Open this URL in a browser and approve the login:\n\n  \(url)\n")
            Console.printNote("Then paste the address the browser ends up at (http://127.0.0.1:…/callback?…):")
            guard let pasted = readLine(strippingNewline: true), !pasted.trimmingCharacters(in: .whitespaces).isEmpty else {
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
            if error.name == "OAuthLoginTimeout" { cancel(loginID) }
            throw CtlFailure.from(error, context: context)
        case .success(let result):
            if command.output.json { return Console.printLine(result.prettyPrinted) }
            let account = try AccountSummary.fromResult(result)
            Console.printLine("Logged in as \(account.displayHandle) (\(account.did)), account \(account.id)")
        }
    }

    /// Ctrl-C: cancel the login in the daemon, then exit 130 as a shell expects.
    private func cancelOnInterrupt(_ loginID: String) -> any DispatchSourceSignal {
        signal(SIGINT, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: SIGINT, queue: .global())
        source.setEventHandler { [self] in
            cancel(loginID)
            Console.printNote("\nLogin cancelled.")
            exit(130)
        }
        source.resume()
        return source
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
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = [url]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        do {
            try process.run()
        } catch {
            return false
        }
        Console.printNote("Opened the login page in your browser. If nothing appeared, open:\n\n  \(url)\n")
        return true
    }
}
