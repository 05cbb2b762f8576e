import ATPermissions
import TOMLKit

/// One `[[client]]` of the configuration: sockets of their own for less-trusted programs, held
/// to a policy (gpg-agent's restricted socket, tailscaled's per-uid powers).
///
/// ```toml
/// [[client]]
/// name = "reader"
/// socket = "/run/user/1000/blueskyd/reader.sock"          # JSON-RPC
/// gateway_socket = "/run/user/1000/blueskyd/reader-xrpc.sock"  # XRPC gateway
/// policy = "read"
/// accounts = ["alice.example.com"]
/// ```
public struct ClientSettings: Sendable, Hashable {
    /// Names the client in errors and the journal, and its sockets in socket activation
    /// (FileDescriptorName= `<name>` and `<name>-xrpc`).
    public var name: String
    /// Its JSON-RPC socket, if it has one.
    public var socket: String?
    /// Its XRPC gateway socket, if it has one.
    public var gatewaySocket: String?
    /// The permissions it is allowed, as written (atproto syntax); nil: every call.
    public var policy: String?
    /// The accounts it may use; nil: every account.
    public var accounts: [String]?

    public init(name: String, socket: String? = nil, gatewaySocket: String? = nil, policy: String? = nil, accounts: [String]? = nil) {
        self.name = name
        self.socket = socket
        self.gatewaySocket = gatewaySocket
        self.policy = policy
        self.accounts = accounts
    }

    static let keys = ["name", "socket", "gateway_socket", "policy", "accounts"]

    /// The policy this client is held to.
    var clientPolicy: ClientPolicy {
        // Checked when read: a policy that cannot be parsed never gets this far.
        (try? ClientPolicy.parse(name: name, policy: policy, accounts: accounts)) ?? ClientPolicy(name: name, grant: PermissionGrant([]), accounts: [])
    }

    /// FileDescriptorName= of the client's gateway socket in a .socket unit.
    var gatewayDescriptorName: String { name + "-xrpc" }
}

extension DaemonConfiguration {
    /// Reads the `[[client]]` array of tables; every mistake names the client and the key.
    static func parseClients(_ value: TOMLValueConvertible, reader: ConfigurationFileReader, file: String?) throws(ConfigurationError) -> [ClientSettings] {
        let tables = NamedTables(kind: "client", reader: reader, file: file)
        var clients: [ClientSettings] = []
        for entry in try tables.entries(value, keys: ClientSettings.keys) {
            let (name, table) = (entry.name, entry.table)
            func string(_ key: String) throws(ConfigurationError) -> String? { try entry.string(key) }
            func fail(_ what: String) -> ConfigurationError { tables.fail(what) }
            var client = ClientSettings(name: name, socket: try string("socket"), gatewaySocket: try string("gateway_socket"),
                                        policy: try string("policy"))
            if let value = table["accounts"] {
                guard let items = value.array, items.count > 0,
                      case let names = items.compactMap({ $0.string }), names.count == items.count, !names.contains("") else {
                    throw fail("client '\(name)': accounts must be a non-empty array of UUIDs, DIDs or handles")
                }
                client.accounts = names
            }
            guard client.socket != nil || client.gatewaySocket != nil else {
                throw fail("client '\(name)' needs a socket, a gateway_socket, or both")
            }
            if let policy = client.policy {
                do throws(PermissionSyntaxError) {
                    _ = try ClientPolicy.parse(name: name, policy: policy, accounts: nil)
                } catch {
                    throw fail("client '\(name)': \(error.description)")
                }
            }
            clients.append(client)
        }
        return clients
    }
}
