#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Which parts of a document to build. The mapper reads a few fields of each event; building only those
/// saves most of the allocations of parsing (and of freeing the tree afterwards).
struct JSONProjection: Sendable {
    /// One member to build: its name (as a string and as UTF-8, which keys are compared with before any
    /// string is made) and what to build of its value.
    struct Member: Sendable {
        var key: String
        var utf8: [UInt8]
        var projection: JSONProjection
    }

    /// `nil`: everything. Otherwise only these members of an object. Arrays on the way are built whole.
    private(set) var members: [Member]?

    /// Build everything.
    static let everything = JSONProjection(members: nil)
    /// Build nothing (but check it all).
    static let nothing = JSONProjection(members: [])

    private init(members: [Member]?) {
        self.members = members
    }

    /// A projection building the values at `paths` (object member names from the root), each whole.
    init(paths: [[String]]) {
        self = .nothing
        for path in paths { self.add(path[...]) }
    }

    private mutating func add(_ path: ArraySlice<String>) {
        guard var members = self.members else { return }
        guard let first = path.first else {
            self.members = nil
            return
        }
        if let index = members.firstIndex(where: { $0.key == first }) {
            members[index].projection.add(path.dropFirst())
        } else {
            var child = JSONProjection.nothing
            child.add(path.dropFirst())
            members.append(Member(key: first, utf8: Array(first.utf8), projection: child))
        }
        self.members = members
    }

    /// The member whose name is the UTF-8 `key`; `nil` when it is not needed.
    func member(utf8 key: UnsafeBufferPointer<UInt8>) -> (key: String, projection: JSONProjection)? {
        guard let members = self.members else { return nil }
        for index in members.indices where members[index].utf8.count == key.count {
            let equal = members[index].utf8.withUnsafeBufferPointer { name in
                guard let nameBase = name.baseAddress, let keyBase = key.baseAddress else { return key.isEmpty }
                return memcmp(nameBase, keyBase, key.count) == 0
            }
            if equal { return (members[index].key, members[index].projection) }
        }
        return nil
    }
}
