import Testing

@testable import APNSClient

@Suite("Identity groups")
struct IdentityGroupsTests {
    private final class Target {}

    @Test("items go to their object's group, groups in the order their objects first came, equal-looking objects apart")
    func grouping() {
        let (first, second, third) = (Target(), Target(), Target())
        var groups = IdentityGroups<Target, Int>(expecting: 6)
        for (item, target) in [(1, second), (2, first), (3, second), (4, third), (5, first), (6, second)] {
            groups.append(item, to: target)
        }
        let order = groups.groups.map { ObjectIdentifier($0.key) }
        #expect(order == [second, first, third].map(ObjectIdentifier.init))
        #expect(groups.groups.map(\.items) == [[1, 3, 6], [2, 5], [4]])
    }

    @Test("no item, no group")
    func empty() {
        let groups = IdentityGroups<Target, Int>(expecting: 0)
        #expect(groups.groups.isEmpty)
    }
}
