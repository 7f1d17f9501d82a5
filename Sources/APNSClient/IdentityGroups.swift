/// Items grouped by the object they go to (a client, a connection), in the order the objects first came: a short
/// array searched by identity. A batch goes to only a few such objects, and a dictionary of arrays appended
/// through its `default:` subscript copied the group's array at every append (an allocation per item).
package struct IdentityGroups<Key: AnyObject, Item> {
    /// The groups so far.
    package private(set) var groups: [(key: Key, items: [Item])] = []
    /// Room each new group reserves: the batch's size, so no group grows.
    private let capacity: Int

    /// No groups yet; each new one reserves room for `capacity` items.
    package init(expecting capacity: Int) {
        self.capacity = capacity
    }

    /// Appends `item` to the group of `key`, starting one when there is none yet.
    package mutating func append(_ item: Item, to key: Key) {
        if let index = self.groups.firstIndex(where: { $0.key === key }) {
            self.groups[index].items.append(item)
            return
        }
        var items: [Item] = []
        items.reserveCapacity(self.capacity)
        items.append(item)
        self.groups.append((key, items))
    }
}
