import ArgumentParser
import FoundationEssentials
import JSONRPC

/// `bskyctl login`: adds an account to blueskyd, with OAuth (`accounts.oauth.*`) or an app
/// password (`accounts.add`).
struct LoginCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "login",
        abstract: "Log in to an account and let blueskyd keep it signed in.",
        discussion: """
            With --app-password, the app password is read from the terminal with echo off when \
            stdin is a terminal, or else from the first line of stdin \
            (e.g. `pass show bsky | bskyctl login alice.bsky.social --app-password`). It is never \
            taken from the command line or the environment. Create app passwords in the Bluesky \
            app under Settings > Privacy and security > App passwords.

            If the server emails a sign-in code, bskyctl asks for it on the terminal; without a \
            terminal, put the code in a file and pass --auth-factor-token-file FILE.

            By default the login uses OAuth: blueskyd prepares the authorization and listens on \
            127.0.0.1 for the browser's redirect; bskyctl opens the URL with xdg-open when a \
            desktop is there ($DISPLAY or $WAYLAND_DISPLAY) and prints it otherwise, then waits \
            up to --timeout seconds. Ctrl-C cancels the login in blueskyd too. On a machine \
            reached over SSH, --no-browser prints the URL and reads the address the browser was \
            finally sent to (http://127.0.0.1:…/callback?…), pasted on stdin. When blueskyd is \
            configured as a hosted client whose redirect is a web page (oauth_redirect_uri = \
            https://…), the browser cannot reach blueskyd: bskyctl opens the URL when it can and \
            always reads the final address from stdin.

            The identifier may also be a PDS or entryway URL (https://…).

            Prints: Logged in as <handle> (<did>), account <uuid>
            """)

    /// How to log in: OAuth unless --app-password.
    enum Method {
        case appPassword
        case oauth
    }

    @Argument(help: ArgumentHelp("The account's handle or DID, or a PDS or entryway URL.", valueName: "handle-did-or-url"))
    var identifier: String

    @Flag(name: .long, help: "Log in with an app password instead of OAuth.")
    var appPassword = false

    @Flag(name: .long, help: "OAuth: print the URL and read the final redirect URL from stdin instead of opening a browser.")
    var noBrowser = false

    @Option(name: .long, help: ArgumentHelp("OAuth: the scope to ask for (default: atproto transition:generic).", valueName: "scope"))
    var scope: String?

    @Option(name: .long, help: ArgumentHelp("OAuth: replace this account's session in place (same id, same default).", valueName: "account"))
    var upgrade: String?

    @Flag(name: .customLong("default"), help: "Make this the default account (the first account always is).")
    var makeDefault = false

    @Option(
        name: .long,
        help: ArgumentHelp("A file holding the sign-in code the server emailed (for use without a terminal).", valueName: "file"))
    var authFactorTokenFile: String?

    @OptionGroup var connection: ConnectionOptions
    @OptionGroup var output: OutputOptions

    var method: Method { appPassword ? .appPassword : .oauth }

    func validate() throws {
        guard !identifier.isEmpty else { throw ValidationError("give the account's handle or DID") }
        if appPassword, noBrowser || scope != nil || upgrade != nil {
            throw ValidationError("--no-browser, --scope and --upgrade are OAuth options; leave out --app-password")
        }
    }

    func run() throws {
        switch method {
        case .oauth:
            try OAuthLogin(command: self).run()
        case .appPassword:
            try logInWithAppPassword()
        }
    }

    private func logInWithAppPassword() throws(CtlFailure) {
        // Connect before asking for the password, so a stopped daemon is reported at once.
        let client = try connection.connect()
        let password = try readAppPassword()
        let fileToken = try readTokenFile()
        let context = RequestContext(identifier: identifier)

        var outcome = try client.callForResult("accounts.add", addParams(password: password, token: fileToken))
        if case .failure(let error) = outcome, error.catalogueName == .authFactorTokenRequired, fileToken == nil {
            let token = try promptForSignInCode()
            // A fresh connection: reading the email may take longer than the daemon keeps an idle one.
            outcome = try connection.connect().callForResult("accounts.add", addParams(password: password, token: token))
        }
        switch outcome {
        case .failure(let error):
            if error.catalogueName == .authFactorTokenRequired {
                throw .requestFailed("the server did not accept the sign-in code; run bskyctl login again to get a new one")
            }
            throw CtlFailure.from(error, context: context)
        case .success(let result):
            if output.json { return Console.printLine(result.prettyPrinted) }
            let account = try AccountSummary.fromResult(result)
            Console.printLine("Logged in as \(account.displayHandle) (\(account.did)), account \(account.id)")
        }
    }

    private func addParams(password: String, token: String?) -> JSONValue {
        var params: [String: JSONValue] = ["identifier": .string(identifier), "password": .string(password)]
        if let token { params["authFactorToken"] = .string(token) }
        if makeDefault { params["makeDefault"] = true }
        return .object(params)
    }

    private func readAppPassword() throws(CtlFailure) -> String {
        let password: String?
        if SecretInput.standardInputIsTerminal {
            password = SecretInput.readFromTerminal(prompt: "App password for \(identifier): ", echo: false)
        } else {
            password = SecretInput.firstLineOfStandardInput()
        }
        guard let password, !password.isEmpty else {
            throw .usage("no app password given: type it at the prompt, or pipe it as the first line of stdin")
        }
        return password
    }

    private func readTokenFile() throws(CtlFailure) -> String? {
        guard let path = authFactorTokenFile else { return nil }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw .usage("cannot read --auth-factor-token-file \(path)")
        }
        let token = String(decoding: data, as: UTF8.self).trimmingWhitespace()
        guard !token.isEmpty else { throw .usage("--auth-factor-token-file \(path) is empty") }
        return token
    }

    private func promptForSignInCode() throws(CtlFailure) -> String {
        let noTerminal = CtlFailure.requestFailed(
            "the server emailed a sign-in code; run bskyctl login in a terminal to enter it, or put it in a file and pass --auth-factor-token-file FILE")
        guard let code = SecretInput.readFromTerminal(prompt: "The server emailed a sign-in code to this account's address.\nSign-in code: ", echo: true) else {
            throw noTerminal
        }
        let trimmed = code.trimmingSpaces()
        guard !trimmed.isEmpty else { throw .usage("no sign-in code entered") }
        return trimmed
    }
}
