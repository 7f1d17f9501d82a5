/// Which parts of a document to put on its tape (``JSONDocument``). The mapper reads a few fields of each event;
/// only those take nodes, and the rest is checked and skipped.
///
/// Flat, so that the parser carries a position in it (``Selection``) down the document rather than copies of
/// nested projections (each a reference to count).
struct JSONProjection: Sendable {
    /// What to build of one value.
    enum Selection: Equatable {
        /// The whole value.
        case everything
        /// Of an object, the members listed at ``JSONProjection/objects`` `[index]`; nothing of anything else
        /// (arrays on the way are built whole).
        case object(Int)
    }

    /// One member to build: its name, as the tape compares it and as text, and what to build of its value.
    struct Member: Sendable {
        let key: SegmentKey
        let name: String
        let selection: Selection
    }

    /// For each object selection, its members' range in ``members``.
    private let objects: [Range<Int>]
    private let members: [Member]
    /// What to build of the document.
    let root: Selection

    /// Build everything.
    static let everything = JSONProjection(objects: [], members: [], root: .everything)

    private init(objects: [Range<Int>], members: [Member], root: Selection) {
        self.objects = objects
        self.members = members
        self.root = root
    }

    /// A projection building the values at `paths` (object member names from the root), each whole.
    init(paths: [[String]]) {
        // A tree first (`nil`: everything), then laid out flat, each object's members together.
        final class Node {
            var members: [(name: String, node: Node)]? = []
            func add(_ path: ArraySlice<String>) {
                guard self.members != nil else { return }
                guard let first = path.first else {
                    self.members = nil
                    return
                }
                if let existing = self.members?.first(where: { $0.name == first }) {
                    existing.node.add(path.dropFirst())
                } else {
                    let child = Node()
                    child.add(path.dropFirst())
                    self.members?.append((first, child))
                }
            }
        }
        let tree = Node()
        for path in paths { tree.add(path[...]) }
        var objects: [Range<Int>] = []
        var members: [Member] = []
        func layOut(_ node: Node) -> Selection {
            guard let children = node.members else { return .everything }
            let object = objects.count
            objects.append(0..<0)
            let selections = children.map { layOut($0.node) }
            let start = members.count
            for (child, selection) in zip(children, selections) {
                members.append(Member(key: SegmentKey(child.name), name: child.name, selection: selection))
            }
            objects[object] = start..<members.count
            return .object(object)
        }
        let root = layOut(tree)
        self.init(objects: objects, members: members, root: root)
    }

    /// What to build of the member whose name is the UTF-8 `key`, of an object selected by `selection`; `nil`
    /// when it is not needed.
    func member(of selection: Selection, utf8 key: UnsafeBufferPointer<UInt8>) -> Selection? {
        guard case .object(let object) = selection else { return .everything }
        for index in self.objects[object] where self.members[index].key.matches(key, segment: self.members[index].name)
        {
            return self.members[index].selection
        }
        return nil
    }
}
