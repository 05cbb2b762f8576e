import Foundation

/// Where the project's built executables are: `$BLUESKYD_BIN_DIR` (set by `make test` and
/// `make bench`), or the directory of the running test bundle or bench (SwiftPM puts them all in
/// the same build directory).
public enum Binaries {
    public static var directory: String {
        if let dir = ProcessInfo.processInfo.environment["BLUESKYD_BIN_DIR"], !dir.isEmpty { return dir }
        let executable = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        var dir = executable.deletingLastPathComponent()
        // On Linux the test runner is `<bin>/blueskydPackageTests.xctest`; on macOS it is inside a bundle.
        while !FileManager.default.fileExists(atPath: dir.appendingPathComponent("blueskyd").path), dir.path != "/" {
            dir = dir.deletingLastPathComponent()
        }
        return dir.path
    }

    public static func path(_ name: String) -> String {
        directory + "/" + name
    }
}

/// A fresh private directory for one test, removed by `remove()`.
public struct TemporaryDirectory: Sendable {
    public let path: String

    public init(_ label: String = "blueskyd-test") throws {
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("\(label)-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: base, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o755])
        path = base.path
    }

    public func file(_ name: String) -> String { path + "/" + name }

    public func remove() { try? FileManager.default.removeItem(atPath: path) }
}
