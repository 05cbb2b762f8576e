import NIOCore

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
        let job = UnownedJob(job)
        eventLoop.execute {
            job.runSynchronously(on: self.asUnownedTaskExecutor())
        }
    }
}
