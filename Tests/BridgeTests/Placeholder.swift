// Tests for this module arrive with its implementation.
import Testing
