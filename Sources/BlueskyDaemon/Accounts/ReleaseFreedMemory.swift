#if canImport(Glibc)
import Glibc
#endif

/// Returns memory freed after a burst of allocations (loading the accounts) to the kernel.
enum ReleaseFreedMemory {
    #if canImport(Glibc)
    private typealias MallocTrim = @convention(c) (Int) -> Int32
    /// glibc's `malloc_trim`, which Swift's Glibc module does not export (it is in malloc.h).
    private static let mallocTrim: MallocTrim? = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "malloc_trim")
        .map { unsafeBitCast($0, to: MallocTrim.self) }
    #endif

    static func now() {
        #if canImport(Glibc)
        _ = mallocTrim?(0)
        #endif
    }
}
