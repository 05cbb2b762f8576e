import ArgumentParser
import BlueskyDaemon
import BlueskydVersion
import Foundation

@main
struct Blueskyd: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "blueskyd",
        abstract: "Keeps Bluesky / AT Protocol accounts signed in and proxies XRPC calls for local programs.",
        version: blueskydVersion,
        subcommands: [Serve.self, Store.self],
        defaultSubcommand: Serve.self)
}

/// The daemon itself: what `blueskyd` with no subcommand runs.
struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Keeps Bluesky / AT Protocol accounts signed in and proxies XRPC calls for local programs.",
        discussion: """
            Serves JSON-RPC 2.0 on a Unix socket (see bskyctl(1) and docs/PROTOCOL.md). Settings come from \
            the command line, then BLUESKYD_* environment variables, then the configuration file \
            ($XDG_CONFIG_HOME/blueskyd/blueskyd.toml or --config), then the defaults.

            Exit status: 0 stopped cleanly; 1 a fatal error; 64 usage; 75 another blueskyd already uses \
            the state directory; 78 configuration error.

            Under systemd: takes the listening socket passed by blueskyd.socket (LISTEN_FDS), reports \
            readiness, status and watchdog keep-alives (NOTIFY_SOCKET), logs to the journal \
            (JOURNAL_STREAM). SIGHUP reloads the configuration; SIGTERM stops gracefully.
            """,
        version: blueskydVersion)

    @Option(help: "Configuration file (TOML).") var config: String?
    @Option(help: "State directory (registry, key, lock).") var stateDirectory: String?
    @Option(help: "Socket path.") var socket: String?
    @Option(help: "The XRPC gateway's socket path (default: xrpc.sock beside the socket; \"\" turns the gateway off).")
    var gatewaySocket: String?
    @Option(help: "Also serve the XRPC gateway on this loopback address, e.g. 127.0.0.1:9583.")
    var gatewayListen: String?
    @Option(help: "The metrics socket path (default: metrics.sock beside the socket; \"\" turns it off).")
    var metricsSocket: String?
    @Option(help: "Also serve the metrics on this loopback address (to any local user), e.g. 127.0.0.1:9584.")
    var metricsListen: String?
    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical.") var logLevel: String?
    @Option(help: "Where logs go: journal, console, or auto (the journal when stderr is connected to it).") var logTarget: String?
    @Option(help: "DNS server for handle lookups, host or host:port (repeatable).") var nameserver: [String] = []
    @Option(help: "PLC directory URL.") var plcURL: String?
    @Option(help: "PEM file of extra certificate authorities to trust.") var caFile: String?
    @Flag(help: "Allow plain http to loopback addresses (development only).") var allowInsecureLoopback = false

    func run() async throws {
        var overrides = DaemonOverrides()
        overrides.configFile = config
        overrides.stateDirectory = stateDirectory
        overrides.socketPath = socket
        overrides.gatewaySocket = gatewaySocket
        overrides.gatewayListen = gatewayListen
        overrides.metricsSocket = metricsSocket
        overrides.metricsListen = metricsListen
        overrides.logLevel = logLevel
        overrides.logTarget = logTarget
        overrides.nameservers = nameserver
        overrides.plcURL = plcURL
        overrides.caFile = caFile
        overrides.allowInsecureLoopback = allowInsecureLoopback
        let status = await DaemonMain.run(overrides)
        if status != 0 { throw ExitCode(status) }
    }
}

/// Commands on the registry itself, beside the daemon, with its configuration and key.
struct Store: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "store",
        abstract: "Work on the account registry with the store key (the daemon's configuration and key).",
        subcommands: [Copy.self, Export.self, Import.self, Rekey.self, Reseal.self])
}

struct Reseal: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "reseal",
        abstract: "Show the accounts whose metadata seal does not hold; seal those written before seals, on your word.",
        discussion: """
            No start of blueskyd seals a row: a row without a seal (a store from before seals, or one \
            rewritten by someone holding the database but not the key) reads as altered and sends no \
            token anywhere. This lists each such row with where it would send its tokens. A row whose \
            secrets were written with a seal (so the seal was removed), or whose seal does not match, \
            is never sealed again: log that account in again. With SQLite, stop blueskyd first; with \
            PostgreSQL, hosts may run (each sealed row is announced to them).

            Exit status: 0 done; 64 an account that cannot be sealed named; 75 blueskyd is running \
            (SQLite); 78 configuration error or the wrong key.
            """)

    @OptionGroup var location: StoreLocationOptions
    @Flag(help: "Seal every account that may be sealed.") var all = false
    @Option(name: .customLong("account"), help: ArgumentHelp("Seal this account (its UUID); repeatable.", valueName: "uuid"))
    var accounts: [String] = []
    @Flag(help: "Show what would be sealed; seal nothing.") var dryRun = false
    @Flag(help: "Print JSON.") var json = false

    func run() async throws {
        var options = StoreReseal.Options()
        options.all = all
        options.accounts = accounts
        options.dryRun = dryRun
        options.json = json
        try exiting(await StoreReseal.run(location.overrides, options: options))
    }
}

struct Copy: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "copy",
        abstract: "Copy every account, with its sessions, into another store (SQLite ↔ PostgreSQL, or another database).",
        discussion: """
            A store is a state directory (SQLite) or a postgres:// URL. The source (--from, default the \
            configured store) is held still: stop blueskyd on it first (its instance lock, or no live host of \
            its tenant). The target must hold no account of the tenant, unless --merge: then an account both \
            hold keeps the newer session (its sealed tokens' issue time; the report names each), the target \
            keeps its default, and its hosts must be stopped too. It gets the copy whole or not at all. \
            Tokens, DPoP keys and nonces, OAuth 2.0 registrations, OAuth client keys, the write-ahead mark, \
            the profile cache and the default account go with it; every row is sealed again under the \
            target's key and tenant. A source row whose seal fails stops the copy before anything is written.

            Keys: --from-key-file, else the key of the state directory copied from, else the daemon's; \
            --to-key-file, else the key already in the target state directory, else the source's (written \
            there as store.key).

            Exit status: 0 copied; 64 usage; 65 a source row fails its seal; 66 the source holds no account; \
            69 a database cannot be reached; 73 the target holds accounts or cannot be written; 75 the source \
            or target is in use; 78 configuration error or a wrong key.
            """)

    @OptionGroup var location: StoreLocationOptions
    @Option(help: ArgumentHelp("The store to copy from (default: the configured one).", valueName: "directory|url"))
    var from: String?
    @Option(help: "The tenant to copy from (PostgreSQL; default: the URL's user).") var fromTenant: String?
    @Option(help: "A file holding the source database's password.") var fromPasswordFile: String?
    @Option(help: "The key the source is sealed with.") var fromKeyFile: String?
    @Option(help: ArgumentHelp("The store to copy into.", valueName: "directory|url")) var to: String
    @Option(help: "The tenant to copy into (PostgreSQL; default: the URL's user, whose rows it may hold).") var toTenant: String?
    @Option(help: "A file holding the target database's password.") var toPasswordFile: String?
    @Option(help: "The key to seal the copy with (default: the target state directory's own, else the source's).") var toKeyFile: String?
    @Flag(help: "Into a store that holds accounts: each account keeps its newer session.") var merge = false
    @Flag(help: "Show what would be copied; write nothing.") var dryRun = false
    @Flag(help: "Print JSON.") var json = false

    func run() async throws {
        var options = StoreCopy.Options()
        options.from = from
        options.fromTenant = fromTenant
        options.fromPasswordFile = fromPasswordFile
        options.fromKeyFile = fromKeyFile
        options.to = to
        options.toTenant = toTenant
        options.toPasswordFile = toPasswordFile
        options.toKeyFile = toKeyFile
        options.merge = merge
        options.dryRun = dryRun
        options.json = json
        try exiting(await StoreCopy.run(location.overrides, options: options))
    }
}

struct Export: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export",
        abstract: "Write every account, with its sessions, to one file sealed with the store key.",
        discussion: """
            The file (format \(StoreExport.formatVersion)) holds the configured store's accounts with all their \
            sessions need, sealed with AES-GCM under a key derived from the store key, in parts each checked \
            on import; it appears only once complete, and never over an existing file. Stop blueskyd first \
            (its instance lock, or no live host of the tenant): tokens rotate.

            Exit status: 0 written; 64 usage; 65 a row fails its seal; 69 the database cannot be reached; \
            73 the file exists or cannot be written; 75 the store is in use; 78 configuration error or a wrong key.
            """)

    @OptionGroup var location: StoreLocationOptions
    @Option(help: ArgumentHelp("The file to write.", valueName: "file")) var to: String
    @Flag(help: "Show what would be written; write nothing.") var dryRun = false
    @Flag(help: "Print JSON.") var json = false

    func run() async throws {
        var options = StoreExport.Options()
        options.to = to
        options.dryRun = dryRun
        options.json = json
        try exiting(await StoreExport.run(location.overrides, options: options))
    }
}

struct Import: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Restore an export file into the configured store, which must hold no account (or --merge).",
        discussion: """
            Refused whole, writing nothing, when the file is damaged anywhere, cut short, of a later format, \
            or sealed with another key; the store gets every account or none. With --merge, into a store that \
            holds accounts, an account both hold keeps the newer session (the report names each). A state directory without a \
            store key gets the export's (--key-file). A refresh token in an older export may be spent since: \
            such an account needs a login after the import: --check finds them, refreshing each restored \
            session once (saving the new tokens as the daemon does) and listing it as live, needs-login or \
            unreachable. A session lives in one store at a time: check a restored store when the store the \
            export came from is gone or stopped for good (a server that sees a spent token come back may end \
            the session in both).

            Exit status: 0 imported (whatever --check found); 64 usage; 65 a damaged file or not an export; 66 the file cannot be \
            read; 69 the database cannot be reached; 73 the store holds accounts; 75 the store is in use; \
            78 configuration error or another key.
            """)

    @OptionGroup var location: StoreLocationOptions
    @Option(help: ArgumentHelp("The export file.", valueName: "file")) var from: String
    @Option(help: "The key the export was sealed with (default: the store's own).") var keyFile: String?
    @Flag(help: "Into a store that holds accounts: each account keeps its newer session.") var merge = false
    @Flag(help: "After the import, try each restored session once against its server.") var check = false
    @Flag(help: "Check the whole file; write nothing.") var dryRun = false
    @Flag(help: "Print JSON.") var json = false

    func run() async throws {
        var options = StoreImport.Options()
        options.check = check
        options.from = from
        options.keyFile = keyFile
        options.merge = merge
        options.dryRun = dryRun
        options.json = json
        try exiting(await StoreImport.run(location.overrides, options: options))
    }
}

struct Rekey: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rekey",
        abstract: "Seal the whole registry again under a new store key; no account needs a login.",
        discussion: """
            Every account's tokens, DPoP key and seal, and every OAuth client key, are opened with the \
            current key, checked, and sealed under the key in --new-key-file (32 raw bytes, 64 hex characters \
            or base64; e.g. umask 077; openssl rand -hex 32 > new.key). The store is replaced whole (SQLite: \
            one file moved in; PostgreSQL: one transaction), then the new key moved over store.key. A rekey \
            killed at any point leaves the store sealed with one key or the other, and the next start (or \
            rekey) goes on with the one that opens it. Stop blueskyd first (its instance lock, or no live \
            host of the tenant). With systemd's credential, or several hosts, give each the new key before \
            it starts again: the old key opens nothing, and a host with it exits 78.

            Exit status: 0 resealed (or sealed with that key already); 64 usage; 65 a row fails its seal; \
            69 the database cannot be reached; 73 the store cannot be written; 75 the store is in use; \
            78 configuration error, a wrong or missing key.
            """)

    @OptionGroup var location: StoreLocationOptions
    @Option(help: ArgumentHelp("The new key.", valueName: "file")) var newKeyFile: String
    @Flag(help: "Show what would be resealed; write nothing.") var dryRun = false
    @Flag(help: "Print JSON.") var json = false

    func run() async throws {
        var options = StoreRekey.Options()
        options.newKeyFile = newKeyFile
        options.dryRun = dryRun
        options.json = json
        try exiting(await StoreRekey.run(location.overrides, options: options))
    }
}

/// Where a `blueskyd store` command finds the daemon's configuration and state: the options
/// every one of them takes.
struct StoreLocationOptions: ParsableArguments {
    @Option(help: "Configuration file (TOML).") var config: String?
    @Option(help: "State directory (registry, key, lock).") var stateDirectory: String?

    var overrides: DaemonOverrides {
        var overrides = DaemonOverrides()
        overrides.configFile = config
        overrides.stateDirectory = stateDirectory
        return overrides
    }
}

/// A command's sysexits status as the process's own.
func exiting(_ status: Int32) throws {
    if status != 0 { throw ExitCode(status) }
}
