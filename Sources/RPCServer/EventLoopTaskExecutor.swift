import NIOCore
#if DEBUG
import Synchronization
#endif

/// Runs tasks on one NIO event loop.
///
/// Each connection's tasks prefer the event loop its socket lives on, so a request is read,
/// handled and answered on one thread: no hop to the concurrency pool and back for every
/// line, which is most of the daemon's added latency on a 2-core machine. Handlers that call
/// async-http-client from there also start their requests on that loop.
package final class EventLoopTaskExecutor: TaskExecutor, @unchecked Sendable {
    let eventLoop: any EventLoop

    package init(_ eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
    }

    package func enqueue(_ job: consuming ExecutorJob) {
        #if DEBUG
        LoopJobCount.jobs.add(1, ordering: .relaxed)
        #endif
        let job = UnownedJob(job)
        eventLoop.execute {
            job.runSynchronously(on: self.asUnownedTaskExecutor())
        }
    }
}

#if DEBUG
/// Jobs run on connections' event loops since the start: each is one resumption of a request's
/// async code, one pass through the loop's queue. Debug builds only (`daemon.status` shows it as
/// `debug.loopJobs`): the end-to-end hop test counts them per call, so that the call path cannot
/// grow hops unnoticed. Release builds count nothing.
package enum LoopJobCount {
    static let jobs = Atomic<UInt64>(0)
    package static var current: UInt64 { jobs.load(ordering: .relaxed) }
}
#endif
