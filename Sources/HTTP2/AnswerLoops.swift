// The threads where HTTP/2 clients call their requests' completions (docs/http2.md, "Completions").

import Foundation
import NIOCore
import NIOPosix

/// The threads where every client connection calls its requests' completions, off its event loop: one per core,
/// made once for the process and kept, each named `h2-answers` (as `top -H`, `perf` and `/proc/<pid>/task/*/comm`
/// show it). A connection takes one of them for its life, so its completions run one at a time and in the order
/// they were handed over. Long-lived and named, where Dispatch's threads came and went under one generic name.
enum AnswerLoops {
    /// The thread name, within Linux's 15 bytes.
    static let threadName = "h2-answers"

    /// One event loop per core; never shut down (a process-wide singleton, as NIO's own).
    static let group: MultiThreadedEventLoopGroup = {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: System.coreCount)
        for loop in group.makeIterator() {
            // On the thread itself: Foundation then names the OS thread.
            loop.execute { Thread.current.name = AnswerLoops.threadName }
        }
        return group
    }()

    /// The answer loop for a new connection (round robin over the cores).
    static func next() -> any EventLoop { Self.group.next() }
}
