import AccountStoreCore
import NIOPosix

/// An export file's reads and writes (blocking system calls, an fsync among them) on NIO's
/// blocking-work threads: never on Swift's cooperative pool, whose threads (one per core) the
/// store's own work needs meanwhile.
enum ExportFileThread {
    static func run<T: Sendable>(_ body: @escaping @Sendable () throws(ExportFileError) -> T) async throws(ExportFileError) -> T {
        do {
            return try await NIOThreadPool.singleton.runIfActive { try body() }
        } catch let error as ExportFileError {
            throw error
        } catch {
            throw .unreadable(path: "the export file", reason: "\(error)")
        }
    }
}
