import Testing
@testable import BlueskyDaemon

@Suite("Who vouches for a TCP client whose owner cannot be read")
struct TokenVouchingTests {
    @Test("only the token file's token vouches; an exec token, a revoked one or none does not")
    func onlyTheTokenFile() {
        let tokens = GatewayTokens()
        let file = tokens.issue(.unrestricted)
        let exec = tokens.issue(ClientPolicy(name: "exec:prog", grant: nil, accounts: nil))
        #expect(tokens.vouches(Optional(file)))
        #expect(!tokens.vouches(Optional(exec)), "an exec token with no policy is still no token file")
        #expect(!tokens.vouches(Optional<String>.none))
        tokens.revoke(file)
        #expect(!tokens.vouches(Optional(file)))
    }
}
