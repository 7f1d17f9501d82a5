import Routing
import Synchronization

// What a configuration reload changes in a running pipeline (docs/configuration.md, "Reloading"): the routes, the
// retry policy and the lanes. The sender is replaced behind the `NotificationSender` the pipeline was given (the
// bridge's `ReloadableSender`), so the pipeline never sees it change.

extension Pipeline {
    /// The parts of the pipeline a reload replaces while it runs. The consume loop reads them once per event, under
    /// one lock that only a reload ever holds for longer than that read.
    package struct LiveSettings: Sendable {
        /// Maps events to notifications: the routes and templates.
        package var mapper: any EventMapper
        /// `apns.retry.max_attempts`.
        package var maxAttempts: Int
        /// `apns.retry.initial_backoff` / `max_backoff`.
        package var retryBackoff: Backoff

        /// Creates live settings.
        package init(mapper: any EventMapper, maxAttempts: Int, retryBackoff: Backoff) {
            self.mapper = mapper
            self.maxAttempts = maxAttempts
            self.retryBackoff = retryBackoff
        }
    }

    /// The live settings in force.
    package var liveSettings: LiveSettings { self.live.withLock { $0 } }

    /// Replaces the mapper and the retry policy. The next event taken is mapped with `settings`, and its
    /// notifications retry by its policy; events already taken keep what they were mapped with, and a notification
    /// on its way keeps the retry policy it started with, so nothing in flight is mapped or counted twice.
    package func reload(_ settings: LiveSettings) {
        self.live.withLock { $0 = settings }
    }

    /// Makes `budgets` the lanes in force (by name; ``LaneSpec/all(_:maxInFlight:maxInFlightBytes:)``): a lane with
    /// more room hands it out to what waits for it at once; one with less takes nothing new until what it has in
    /// flight fits; a new name is a new lane, and a lane no budget names is taken away once its work finished (routes
    /// that still name it go to the default lane). Without lanes nothing changes: the pipeline's one line and its
    /// code path are made at start.
    package func reloadLanes(_ budgets: [LaneSpec]) {
        self.lanes?.reload(budgets, source: self.source, metrics: self.metrics)
    }
}
