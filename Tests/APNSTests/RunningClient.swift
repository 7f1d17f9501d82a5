import APNSClient

extension APNSClient {
    /// This client with ``APNSClient/run()`` started, in a task that ends when the test calls `shutdown()`: the
    /// tests make a client, use it and shut it down, as the bridge's sender service does around its run.
    func running() -> APNSClient {
        Task { await self.run() }
        return self
    }
}
