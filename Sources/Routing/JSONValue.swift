/// A JSON value as the mapper sees it: events are parsed into it, payload templates are written in it, and
/// rendered payloads are serialised from it.
///
/// Integers are kept apart from doubles so that an `Int64` read from an event is written back digit for digit,
/// and objects keep their members in document order (a payload is sent with its keys in the order the route
/// wrote them). Duplicate member names are kept as parsed; lookups answer the last one, like JavaScript.
package enum JSONValue: Sendable {
    /// `null`.
    case null
    /// `true` or `false`.
    case bool(Bool)
    /// A number written without fraction or exponent that fits in 64 bits.
    case integer(Int64)
    /// Any other number. Non-finite values cannot be written in JSON and are serialised as `null`.
    case double(Double)
    /// A string.
    case string(String)
    /// An array.
    case array([JSONValue])
    /// An object, members in document order.
    case object([(key: String, value: JSONValue)])
}

extension JSONValue {
    /// The member named `key` of an object (the last one when the name repeats); `nil` for anything else.
    package subscript(key: String) -> JSONValue? {
        guard case .object(let members) = self else { return nil }
        var index = members.endIndex
        while index > members.startIndex {
            index -= 1
            if members[index].key == key { return members[index].value }
        }
        return nil
    }

    /// Follows `path`, one object member (or, for a number, one array element) per segment.
    ///
    /// `path` as written in routes: `customer.apns_tokens`, `items.0.sku`.
    package func value(atPath path: some Sequence<Substring>) -> JSONValue? {
        var current = self
        for segment in path {
            guard let next = current.child(named: segment) else { return nil }
            current = next
        }
        return current
    }

    /// One step of a path: an object member, or an array element when `segment` is a decimal index.
    func child(named segment: Substring) -> JSONValue? {
        self.child(named: String(segment))
    }

    /// One step of a path: an object member, or an array element when `segment` is a decimal index.
    func child(named segment: String) -> JSONValue? {
        switch self {
        case .object(let members):
            // Comparing lengths first skips most other members cheaply: unequal strings take the standard
            // library's slow comparison path.
            let length = segment.utf8.count
            var index = members.endIndex
            while index > members.startIndex {
                index -= 1
                if members[index].key.utf8.count == length, members[index].key == segment {
                    return members[index].value
                }
            }
            return nil
        case .array(let elements):
            guard let index = Int(segment), elements.indices.contains(index) else { return nil }
            return elements[index]
        default:
            return nil
        }
    }

    /// Whether this is `null`.
    package var isNull: Bool {
        if case .null = self { return true }
        return false
    }

    /// The JSON type's name, for messages: `null`, `boolean`, `integer`, `number`, `string`, `array`, `object`.
    package var typeName: String {
        switch self {
        case .null: "null"
        case .bool: "boolean"
        case .integer: "integer"
        case .double: "number"
        case .string: "string"
        case .array: "array"
        case .object: "object"
        }
    }
}

extension JSONValue {
    /// The type's name with its article, for messages: `an integer`, `a string`.
    var typeNameWithArticle: String {
        switch self {
        case .integer, .array, .object: "an \(self.typeName)"
        default: "a \(self.typeName)"
        }
    }
}

/// Type-exact equality, as route `match` uses it: `1` (integer) and `1.0` (number) differ, and objects are
/// equal when they have the same members whatever their order.
extension JSONValue: Equatable {
    package static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): return true
        case (.bool(let left), .bool(let right)): return left == right
        case (.integer(let left), .integer(let right)): return left == right
        case (.double(let left), .double(let right)): return left == right
        case (.string(let left), .string(let right)): return left == right
        case (.array(let left), .array(let right)): return left == right
        case (.object(let left), .object(let right)):
            guard left.count == right.count else { return false }
            if left.elementsEqual(right, by: { $0.key == $1.key && $0.value == $1.value }) { return true }
            for member in left where rhs[member.key] != member.value {
                return false
            }
            return true
        default: return false
        }
    }
}

extension JSONValue: ExpressibleByNilLiteral, ExpressibleByBooleanLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByFloatLiteral, ExpressibleByStringLiteral, ExpressibleByArrayLiteral,
    ExpressibleByDictionaryLiteral
{
    /// `null`.
    package init(nilLiteral: ()) { self = .null }
    /// A boolean.
    package init(booleanLiteral value: Bool) { self = .bool(value) }
    /// An integer.
    package init(integerLiteral value: Int64) { self = .integer(value) }
    /// A double.
    package init(floatLiteral value: Double) { self = .double(value) }
    /// A string.
    package init(stringLiteral value: String) { self = .string(value) }
    /// An array.
    package init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    /// An object, members in the literal's order.
    package init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(elements.map { (key: $0.0, value: $0.1) })
    }
}
