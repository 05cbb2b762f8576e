import DaemonHarness
import Foundation

/// Section 15: the installed size of blueskyd and bskyctl, as built and stripped (what
/// `make install` lays out), against the targets.
enum FootprintBench {
    static let section = "footprint"
    /// 40 MB and 15 MB (10^6 bytes), stripped.
    static let daemonTargetBytes = 40_000_000
    static let controlTargetBytes = 15_000_000

    static func measure(directory: String) throws -> [BinaryFootprint] {
        try ["blueskyd", "bskyctl"].map { name in
            let path = Binaries.path(name)
            let built = try size(of: path)
            let stripped = directory + "/" + name + ".stripped"
            let strip = Process()
            strip.executableURL = URL(fileURLWithPath: "/usr/bin/strip")
            strip.arguments = ["-o", stripped, path]
            try strip.run()
            strip.waitUntilExit()
            guard strip.terminationStatus == 0 else {
                throw BenchError.unexpectedReply("strip \(path) exited with \(strip.terminationStatus)")
            }
            defer { try? FileManager.default.removeItem(atPath: stripped) }
            return BinaryFootprint(name: name, builtBytes: built, strippedBytes: try size(of: stripped),
                                   targetBytes: name == "blueskyd" ? daemonTargetBytes : controlTargetBytes)
        }
    }

    private static func size(of path: String) throws -> Int {
        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        return (attributes[.size] as? NSNumber)?.intValue ?? 0
    }
}

struct BinaryFootprint: Codable, Sendable {
    var name: String
    var builtBytes: Int
    var strippedBytes: Int
    var targetBytes: Int

    var meetsTarget: Bool { strippedBytes <= targetBytes }
}
