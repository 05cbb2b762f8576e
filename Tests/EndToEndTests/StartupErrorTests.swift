import BlueskyTesting
import Foundation
import Testing

@Suite("Start-up: unusable settings")
struct StartupErrorTests {
    @Test("an unusable CA file, PLC URL or nameserver exits 78 with one line naming it, and no crash",
          arguments: [
              (["--ca-file", "/nonexistent/ca.pem"], "cannot use the CA file /nonexistent/ca.pem (ca_file): no such readable file"),
              (["--ca-file", "/etc/hostname"], "cannot use the CA file /etc/hostname (ca_file): it holds no PEM certificate"),
              (["--plc-url", "ftp://plc.example"], "plc_url is not an https URL: ftp://plc.example"),
              (["--nameserver", "bad host:99999"], "invalid DNS server \"bad host:99999\""),
          ])
    func unusableSetting(arguments: [String], message: String) async throws {
        let directory = try TemporaryDirectory("blueskyd-startup")
        defer { directory.remove() }
        let run = try await ProcessRunner.run(
            Binaries.path("blueskyd"),
            ["--state-directory", directory.file("state"), "--socket", directory.file("blueskyd.sock")] + arguments,
            check: false)
        #expect(run.status == 78, "exit status: \(run.status), stderr: \(run.standardError)")
        #expect(run.standardError.contains("blueskyd: " + message), "\(run.standardError)")
        #expect(!FileManager.default.fileExists(atPath: directory.file("blueskyd.sock")), "nothing was left listening")
    }
}
