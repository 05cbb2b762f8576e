import ArgumentParser
import FoundationEssentials
import JSONRPC

/// `bskyctl client-metadata`: the OAuth client metadata document to publish at the configured
/// `oauth_client_id` (`oauth.clientMetadata`), its JWKS, and key rotation (`oauth.rotateClientKey`).
struct ClientMetadataCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "client-metadata",
        abstract: "Print the OAuth client metadata document to publish at oauth_client_id.",
        discussion: """
            blueskyd presents the loopback development client unless blueskyd.toml sets oauth_client_id \
            (an https URL) and oauth_redirect_uri. Publish what this prints at that URL, as \
            application/json, before the first login. A confidential client (oauth_client_auth = \
            "private_key_jwt") lists its public signing keys inline; --jwks prints just those. \
            --rotate-key makes a new signing key for new logins and drops the old keys no session uses; \
            publish the new document at once, since servers fetch it at every login and refresh.
            """)

    @OptionGroup var connection: ConnectionOptions
    @OptionGroup var output: OutputOptions
    @Flag(help: "Print only the JWKS ({\"keys\": [...]}) of a confidential client.") var jwks = false
    @Flag(help: "Make a new client signing key, then print the new document.") var rotateKey = false

    func run() throws {
        let client = try connection.connect()
        let reply = try client.call(rotateKey ? "oauth.rotateClientKey" : "oauth.clientMetadata")
        if output.json { return Console.printLine(reply.prettyPrinted) }
        let clientID = reply["clientID"]?.stringValue ?? "?"
        if jwks {
            guard let set = reply["jwks"], set != .null else {
                throw CtlFailure.requestFailed("blueskyd is not a confidential client (oauth_client_auth = \"private_key_jwt\"), so it has no JWKS")
            }
            return Console.printLine(set.prettyPrinted)
        }
        guard let document = reply["document"], document != .null else {
            throw CtlFailure.requestFailed("""
                blueskyd uses the loopback development client (\(clientID)), which has no document to publish; \
                set oauth_client_id and oauth_redirect_uri in blueskyd.toml for a hosted client (blueskyd.toml(5))
                """)
        }
        Console.printLine(document.prettyPrinted)
        if let added = reply["addedKeyID"]?.stringValue {
            let removed = reply["removedKeyIDs"]?.arrayValue?.compactMap(\.stringValue) ?? []
            Console.printNote("New signing key \(added) signs new logins\(removed.isEmpty ? "" : "; removed unused keys \(removed.joined(separator: ", "))").")
        }
        Console.printNote("Publish this document at \(clientID) (Content-Type: application/json).")
    }
}
