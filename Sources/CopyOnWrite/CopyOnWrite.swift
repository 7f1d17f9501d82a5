/// A value kept in one object that every copy shares until one of them changes it (copy on write), for the
/// values the hot path copies at each layer it crosses (`Notification`, `HTTP2Request`): a copy is one retain, where a
/// copy of the value itself retained and released each of its strings and arrays, an atomic operation each.
///
/// `public` and `@inlinable`: this toolchain inlines no `package` declaration into another module, and an access must
/// compile to a load from the shared object (docs/architecture.md, "The parts and their boundaries").
public struct CopyOnWrite<Value> {
    @usableFromInline
    final class Box {
        /// Unchecked: a box is changed only by the one copy that holds it alone, and a dynamic exclusivity check on
        /// each access (a runtime call, for a class's property seen from other modules) cost more than the copies
        /// it saves.
        @exclusivity(unchecked) @usableFromInline var value: Value

        @inlinable
        init(_ value: Value) {
            self.value = value
        }
    }

    @usableFromInline var box: Box

    /// Keeps `value`.
    @inlinable
    public init(_ value: Value) {
        self.box = Box(value)
    }

    /// The value; changing it copies it first when another copy shares it.
    @inlinable
    public var value: Value {
        get { self.box.value }
        _modify {
            if !isKnownUniquelyReferenced(&self.box) {
                self.box = Box(self.box.value)
            }
            yield &self.box.value
        }
    }

    /// Whether `self` and `other` share one value (then they are equal without comparing it).
    @inlinable
    public func isSharing(with other: CopyOnWrite<Value>) -> Bool {
        self.box === other.box
    }
}

/// The value is changed only through a copy that alone holds it.
extension CopyOnWrite: @unchecked Sendable where Value: Sendable {}
