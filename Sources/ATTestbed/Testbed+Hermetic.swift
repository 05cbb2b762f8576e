/// Starting inside the project's hermetic test network, where dnsmasq maps `tbN.test` and
/// `*.tbN.test` to 127.0.0.N.
extension Testbed {
    /// Slots 63 and 64 are left to tests that need an address of the network where nothing, or
    /// only their own black hole, answers (RewrittenRowTests, SharedStoreDeadServerTests): one
    /// each, so that suites running at once never bind the same one.
    public static let hermeticSlots = 1...62

    /// Tries slots N = 1...62, binding 127.0.0.N:443 with domain `tbN.test`; the first free one
    /// wins, so parallel tests each get their own testbed. `configure` may change anything
    /// but the domain, address and port.
    public static func startInHermeticNetwork(
        directory: String,
        configure: (inout TestbedConfiguration) -> Void = { _ in }
    ) async throws -> Testbed {
        for slot in hermeticSlots {
            var configuration = TestbedConfiguration(directory: directory)
            configure(&configuration)
            configuration.domain = "tb\(slot).test"
            configuration.bindAddress = "127.0.0.\(slot)"
            configuration.port = 443
            do {
                return try await start(configuration)
            } catch let error as TestbedError where error.isAddressInUse {
                continue
            }
        }
        throw TestbedError.noFreeHermeticSlot
    }
}
