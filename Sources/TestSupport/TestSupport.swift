// The TestSupport module. See docs/architecture.md for where it sits in PushBridge.
