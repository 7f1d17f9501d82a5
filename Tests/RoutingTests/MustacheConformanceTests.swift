import Foundation
import Mustache
import Routing
import Testing

/// The mapper renders text with its own renderer over the routes' JSON. These cases check that, wherever every
/// named value exists, it renders exactly what swift-mustache renders for the same template and data (with
/// HTML escaping off, which routes never use).
@Suite struct MustacheConformanceTests {
    static let data = #"""
        {"token":"t","name":"Ann","n":7,"yes":true,"no":false,
         "order":{"id":"A-1","gift":{"from":"Bob"},"items":[{"sku":"x","qty":1},{"sku":"y","qty":2}]},
         "tags":["red","green"],"empty":[]}
        """#

    static let templates = [
        "Hello {{name}}, {{n}} new",
        "{{order.id}}/{{ order.gift.from }}",
        "{{#order.gift}}from {{from}} to {{name}}{{/order.gift}}",
        "{{#order.items}}{{qty}}x{{sku}}({{order.id}});{{/order.items}}",
        "{{#tags}}[{{.}}]{{/tags}}",
        "{{#yes}}Y{{/yes}}{{#no}}N{{/no}}{{^no}}not no{{/no}}{{^yes}}not yes{{/yes}}",
        "{{#empty}}E{{/empty}}{{^empty}}none{{/empty}}",
        "{{#order}}{{#gift}}{{from}}+{{name}}{{/gift}}{{/order}}",
        "a{{! comment }}b",
        "{{{name}}} & {{&name}}",
    ]

    @Test(arguments: Self.templates)
    func rendersWhatSwiftMustacheRenders(template: String) throws {
        let router = try router(payload: ["t": .string(template + "!")])
        let rendered = try renderedPayload(router, Self.data)["t"] as? String
        let context = Self.mustacheValue(try JSONValue(parsing: Self.data))
        let expected = try MustacheTemplate(string: "{{% CONTENT_TYPE: TEXT}}" + template + "!").render(context)
        #expect(rendered == expected)
    }

    /// A JSON value as the plain Swift values swift-mustache understands.
    static func mustacheValue(_ value: JSONValue) -> Any {
        switch value {
        case .null: return Optional<Any>.none as Any
        case .bool(let bool): return bool
        case .integer(let integer): return Int(integer)
        case .double(let double): return double
        case .string(let string): return string
        case .array(let elements): return elements.map(Self.mustacheValue)
        case .object(let members):
            return Dictionary(members.map { ($0.key, Self.mustacheValue($0.value)) }, uniquingKeysWith: { $1 })
        }
    }
}
