import Foundation

/// Whether this process runs inside `scripts/hermetic-run`: a private network namespace whose
/// resolver (dnsmasq on 127.0.0.1:53) maps `tbN.test` and `*.tbN.test` to 127.0.0.N, where tests
/// may bind ports 53 and 443 without touching the machine.
public enum HermeticNetwork {
    /// Set to `1` by `scripts/hermetic-run` inside the namespace.
    public static let environmentVariable = "BLUESKYD_HERMETIC"

    public static var isActive: Bool {
        ProcessInfo.processInfo.environment[environmentVariable] == "1"
    }

    /// Throws, with a message saying how to run the tests, unless inside the hermetic network.
    public static func require() throws {
        guard isActive else { throw NotHermetic() }
    }

    public struct NotHermetic: Error, CustomStringConvertible {
        public var description: String {
            "NOT IN THE HERMETIC TEST NETWORK: this test needs a private network namespace "
                + "(real hostnames, ports 53 and 443). Run the tests with `make test`, which uses "
                + "scripts/hermetic-run (or run `scripts/hermetic-run swift test ...` yourself)."
        }
    }
}
