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

    @Test("unusable shared-store settings exit 78 with one line saying what to change, before any connection",
          arguments: [
              ("store_url = \"postgresql://u:secret@db.test/blueskyd\"",
               "store_url must not carry a password: put it in store_password_file or the systemd credential blueskyd-store-password"),
              ("store_url = \"postgresql://u@db.test/blueskyd?sslmode=sometimes\"",
               "sslmode must be one of disable, allow, prefer, require, verify-ca, verify-full"),
              ("store_url = \"postgresql://u@db.test/blueskyd\"\ntenant = \"two words\"",
               "the tenant \"two words\" must be 1 to 64 letters, digits, '.', '_' or '-'"),
              ("store_url = \"postgresql://u@db.test/blueskyd\"\nstore_password_file = \"PASSWORD_FILE\"",
               "the store password file PASSWORD_FILE is readable by other users; run `chmod 600 PASSWORD_FILE`"),
              ("store_url = \"postgresql://u@db.test/blueskyd\"\nlease_seconds = 30",
               "lease_seconds (30) must be at least twice upstream_timeout_seconds (30): a refresh may take two requests, "
                   + "and a lease that runs out during them lets another host refresh the same account"),
          ])
    func unusableSharedStore(settings: String, message: String) async throws {
        let directory = try TemporaryDirectory("blueskyd-startup")
        defer { directory.remove() }
        let passwordFile = directory.file("password")
        FileManager.default.createFile(atPath: passwordFile, contents: Data("secret\n".utf8), attributes: [.posixPermissions: 0o644])
        let config = directory.file("blueskyd.toml")
        try settings.replacingOccurrences(of: "PASSWORD_FILE", with: passwordFile).write(toFile: config, atomically: true, encoding: .utf8)
        let run = try await ProcessRunner.run(
            Binaries.path("blueskyd"),
            ["--state-directory", directory.file("state"), "--socket", directory.file("blueskyd.sock"), "--config", config],
            check: false)
        #expect(run.status == 78, "exit status: \(run.status), stderr: \(run.standardError)")
        let expected = message.replacingOccurrences(of: "PASSWORD_FILE", with: passwordFile)
        #expect(run.standardError.contains("blueskyd: " + expected), "\(run.standardError)")
        #expect(!run.standardError.contains("secret"), "the password is never printed")
    }
}
