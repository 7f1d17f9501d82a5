import Configuration
import Foundation
import Routing
import Testing

/// A route's `ordering_key` and `coalesce` (docs/configuration.md, "Per-key order and coalescing").
@Suite struct OrderingConfigurationTests {
    let files: TestFiles

    init() throws {
        self.files = try TestFiles()
    }

    /// ``minimalYAML`` with `lines` (indented like the route's keys) added to its route.
    func yaml(route lines: String) -> String {
        minimalYAML.replacingOccurrences(
            of: "    topic: com.example.app\n", with: "    topic: com.example.app\n" + lines)
    }

    func event(_ json: String, key: String? = "k-1") -> SourceEvent {
        SourceEvent(
            topic: "greetings", partition: 0, offset: 3, key: key.map { Array($0.utf8) }, value: Array(json.utf8))
    }

    @Test("ordering_key renders like the route's templates and coalesce is read")
    func templateKey() throws {
        let loaded = try self.files.load(
            self.yaml(route: "    ordering_key: \"act-{{activity.id}}\"\n    coalesce: true\n"))
        let spec = try #require(loaded.router.specs.first)
        #expect(spec.orderingKey == "act-{{activity.id}}")
        #expect(spec.coalesce)
        let mappings = loaded.router.map(event: self.event(#"{"token":"aa","text":"hi","activity":{"id":42}}"#))
        let mapping = try #require(mappings.first)
        #expect(mapping.coalesces)
        guard case .notifications(let notifications) = mapping.outcome else {
            Issue.record("dead-lettered: \(mapping.outcome)")
            return
        }
        #expect(notifications.first?.orderingKey == Array("act-42".utf8))
    }

    @Test("ordering_key: key takes the Kafka message key's bytes; an event without a key is a dead letter")
    func kafkaKey() throws {
        let loaded = try self.files.load(self.yaml(route: "    ordering_key: key\n"))
        let keyed = try #require(loaded.router.map(event: self.event(#"{"token":"aa","text":"hi"}"#)).first)
        #expect(!keyed.coalesces)
        guard case .notifications(let notifications) = keyed.outcome else {
            Issue.record("dead-lettered: \(keyed.outcome)")
            return
        }
        #expect(notifications.first?.orderingKey == Array("k-1".utf8))
        let unkeyed = try #require(loaded.router.map(event: self.event(#"{"token":"aa","text":"hi"}"#, key: nil)).first)
        guard case .deadLetter(let reason) = unkeyed.outcome else {
            Issue.record("an event without a Kafka key was sent unordered")
            return
        }
        #expect(reason.field == "ordering_key")
        #expect(reason.description.contains("no Kafka key"))
        // A Kafka key past the bound is a dead letter too; one with control characters is only bytes to compare.
        let hugeKey = String(repeating: "k", count: 2000)
        let huge = try #require(
            loaded.router.map(event: self.event(#"{"token":"aa","text":"hi"}"#, key: hugeKey)).first)
        guard case .deadLetter(let hugeReason) = huge.outcome else {
            Issue.record("a 2000-byte Kafka key was taken as an ordering key")
            return
        }
        #expect(hugeReason.field == "ordering_key")
        #expect(hugeReason.description.contains("2000 bytes"), "\(hugeReason.description)")
        let control = try #require(
            loaded.router.map(event: self.event(#"{"token":"aa","text":"hi"}"#, key: "a\u{0}\r\nb")).first)
        guard case .notifications(let controlled) = control.outcome else {
            Issue.record("a key with control characters was dead-lettered: \(control.outcome)")
            return
        }
        #expect(controlled.first?.orderingKey == Array("a\u{0}\r\nb".utf8))
    }

    @Test("an event whose ordering key is missing, null or too long is a dead letter naming ordering_key")
    func missingOrHugeKey() throws {
        let loaded = try self.files.load(self.yaml(route: "    ordering_key: \"{{activity.id}}\"\n"))
        let huge = String(repeating: "x", count: 5000)
        for (json, words) in [
            (#"{"token":"aa","text":"hi"}"#, "activity.id is missing"),
            (#"{"token":"aa","text":"hi","activity":{"id":null}}"#, "activity.id is null"),
            (#"{"token":"aa","text":"hi","activity":{"id":""}}"#, "rendered empty"),
            (#"{"token":"aa","text":"hi","activity":{"id":"\#(huge)"}}"#, "more than 1024 bytes"),
        ] {
            let mapping = try #require(loaded.router.map(event: self.event(json)).first)
            guard case .deadLetter(let reason) = mapping.outcome else {
                Issue.record("not dead-lettered: \(words)")
                continue
            }
            #expect(reason.field == "ordering_key")
            #expect(reason.description.contains(words), "\(reason.description)")
        }
    }

    @Test("routes without ordering_key carry no key")
    func unorderedRoute() throws {
        let loaded = try self.files.load(minimalYAML)
        let mapping = try #require(loaded.router.map(event: self.event(#"{"token":"aa","text":"hi"}"#)).first)
        guard case .notifications(let notifications) = mapping.outcome else {
            Issue.record("dead-lettered")
            return
        }
        #expect(notifications.first?.orderingKey == nil)
        #expect(!mapping.coalesces)
    }

    @Test(
        "a wrong ordering_key or coalesce is an error naming the key and the fix",
        arguments: [
            ("    ordering_key: \"\"\n", "routes[0].ordering_key", "ordering_key is empty", "{{activity.id}}"),
            ("    ordering_key: \"   \"\n", "routes[0].ordering_key", "ordering_key is empty", "ordering_key: key"),
            ("    ordering_key: \"{{activity.id\"\n", "routes[0].ordering_key", "broken template", nil),
            ("    ordering_key: \"{{> partial}}\"\n", "routes[0].ordering_key", "not supported", nil),
            ("    ordering_key: activity.id\n", "routes[0].ordering_key", "has no tag", "{{activity.id}}"),
            ("    ordering_key: [a, b]\n", "routes[0].ordering_key", "expected a string", nil),
            ("    coalesce: true\n", "routes[0].coalesce", "coalesce needs ordering_key", "ordering_key"),
            ("    ordering_key: key\n    coalesce: yes please\n", "routes[0].coalesce", "expected true or false", nil),
            ("    ordering_key: key\n    coalesce: 1\n", "routes[0].coalesce", "expected true or false", nil),
            ("    ordering_key: key\n    coalesce: [true]\n", "routes[0].coalesce", "expected true or false", nil),
        ] as [(String, String, String, String?)])
    func problems(lines: String, path: String, message: String, hint: String?) throws {
        let problems = self.files.problems(self.yaml(route: lines))
        let problem = try #require(problems.first { $0.path == path }, "problems: \(problems)")
        #expect(problem.message.contains(message), "\(problem)")
        if let hint { #expect(problem.hint?.contains(hint) == true, "\(problem)") }
        #expect(problem.line != nil, "\(problem)")
    }

    @Test("coalesce: false without ordering_key is fine")
    func coalesceFalse() throws {
        let loaded = try self.files.load(self.yaml(route: "    coalesce: false\n"))
        #expect(loaded.router.specs.first?.coalesce == false)
    }
}
