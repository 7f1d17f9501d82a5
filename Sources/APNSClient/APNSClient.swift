// The APNSClient module. See docs/architecture.md for where it sits in PushBridge.
