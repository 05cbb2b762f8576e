import Foundation
import Testing
@testable import BskyCtlKit

/// What `bskyctl exec --sandbox` shows the program of the file system.
@Suite struct SandboxTests {
    static let environment = ["PATH": "/usr/bin:/bin", "HOME": "/root", "XDG_RUNTIME_DIR": "/run/user/0"]

    static func shown(from workingDirectory: String) throws -> [String] {
        let arguments = try Sandbox.arguments(["/usr/bin/true"], socket: "/tmp/x-exec/a/xrpc.sock", hidden: [], paths: .init(),
                                              environment: environment, workingDirectory: workingDirectory)
        return arguments.indices.filter { arguments[$0] == "--ro-bind" || arguments[$0] == "--bind" }.map { arguments[$0 + 1] }
    }

    @Test("a working directory that holds what the sandbox hides (/, /run, /tmp, the home) is not shown; the program starts at /",
          arguments: ["/", "/run", "/root", "/tmp", "/run/user"])
    func broadWorkingDirectory(_ directory: String) throws {
        try #require(FileManager.default.fileExists(atPath: "/usr/bin/bwrap"), "make deps installs bubblewrap")
        let shown = try Self.shown(from: directory)
        #expect(!shown.contains(directory) && !shown.contains("/"), "\(shown)")
    }

    @Test("a project directory is shown, read-only")
    func projectDirectory() throws {
        try #require(FileManager.default.fileExists(atPath: "/usr/bin/bwrap"), "make deps installs bubblewrap")
        #expect(try Self.shown(from: "/usr/share").contains("/usr/share"))
    }
}
