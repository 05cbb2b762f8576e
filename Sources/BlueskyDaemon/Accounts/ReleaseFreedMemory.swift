#if canImport(Glibc)
import Glibc
#endif

/// Returns memory freed after a burst of allocations (loading the accounts) to the kernel.
enum ReleaseFreedMemory {
    #if canImport(Glibc)
    private typealias MallocTrim = @convention(c) (Int) -> Int32
    private typealias MallocOption = @convention(c) (Int32, Int32) -> Int32
    /// glibc's `malloc_trim` and `mallopt`, which Swift's Glibc module does not export (they
    /// are in malloc.h).
    private static let mallocTrim: MallocTrim? = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "malloc_trim")
        .map { unsafeBitCast($0, to: MallocTrim.self) }
    private static let mallocOption: MallocOption? = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "mallopt")
        .map { unsafeBitCast($0, to: MallocOption.self) }
    /// `M_MMAP_THRESHOLD` in malloc.h.
    private static let mmapThresholdOption: Int32 = -3
    #endif

    static func now() {
        #if canImport(Glibc)
        _ = mallocTrim?(0)
        #endif
    }

    /// Keeps blocks of 1 MiB and more (the registry's tables while they grow) in their own
    /// mappings, which go back to the kernel whole when freed.
    ///
    /// glibc otherwise raises its threshold (128 KiB at first) each time such a block is freed,
    /// so that the tables which outgrow their storage while loading get carved from the heap,
    /// where the small long-lived objects allocated in between keep their pages. Measured at
    /// 100,000 accounts, five starts each: idle RSS 117.5 to 125.1 MiB with the moving
    /// threshold, 116.9 to 117.8 MiB with it fixed at 1 MiB. Not 128 KiB: buffers of a few
    /// hundred KiB come and go with every proxied call, and mapping each cost 10 to 20 µs
    /// of added latency (p50).
    static func keepLargeBlocksMapped() {
        #if canImport(Glibc)
        _ = mallocOption?(mmapThresholdOption, 1 << 20)
        #endif
    }
}
