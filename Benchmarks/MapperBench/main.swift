// Events mapped per second on one core for the example route `order-shipped` (config/pushbridge.yaml): parse the event JSON, match, render the
// header templates and the payload, serialise it, and derive the notification ids.
//
// Usage: MapperBench [CPU seconds per scenario, default 3, measured in rounds of 0.5 s]
//        MapperBench --count N   maps N one-token events and exits: a fixed amount of work for instruction
//                                counts (`perf stat -e instructions:u`), which vary far less than timings.

import APNSCore
import Foundation
import Routing

let secondsPerScenario = CommandLine.arguments.dropFirst().first.flatMap(Double.init) ?? 3

let route = RouteSpec(
    name: "order-shipped",
    inputTopic: "orders.shipped",
    match: [("type", "shipped")],
    deviceTokens: "{{customer.apns_tokens}}",
    topic: "com.example.shop",
    pushType: "alert",
    priority: 10,
    expiration: "{{expires_at}}",
    collapseID: "order-{{order.id}}",
    payload: [
        "aps": [
            "alert": [
                "title": "Your order {{order.id}} has shipped",
                "body": "{{order.carrier}} expects to deliver it {{order.eta}}",
            ],
            "badge": "{{customer.unread_count}}",
            "sound": "default",
        ],
        "order_id": "{{order.id}}",
    ]
)

let router: Router
do {
    router = try Router(routes: [route])
} catch {
    print("the benchmark route does not compile: \(error)")
    exit(1)
}

/// 1024 distinct events, as a producer would send them, with `tokenCount` tokens each.
func makeEvents(tokenCount: Int) -> [SourceEvent] {
    (0..<1024).map { index in
        let tokens = (0..<tokenCount).map {
            "\"\(String(repeating: String(format: "%02x", (index + $0) % 256), count: 32))\""
        }
        let json = """
            {"type":"shipped","expires_at":\(1_790_000_000 + index),\
            "order":{"id":"A-\(100_000 + index)","carrier":"UPS",\
            "eta":"tomorrow","items":[{"sku":"SKU-\(index)","qty":1}],"total":{"amount":129.95,"currency":"EUR"}},\
            "customer":{"id":"customer-\(index)","apns_tokens":[\(tokens.joined(separator: ","))],\
            "unread_count":\(index % 10)}}
            """
        return SourceEvent(
            topic: "orders.shipped", partition: Int32(index % 12), offset: Int64(index),
            key: Array("customer-\(index)".utf8),
            timestampMilliseconds: 1_700_000_000_000, headers: [("trace-id", Array("trace-\(index)".utf8))],
            value: Array(json.utf8))
    }
}

/// CPU time this thread has used. The machine is shared, so rates are per CPU second of the mapping thread,
/// not per wall-clock second, which other processes would dilute.
func threadCPUSeconds() -> Double {
    var time = timespec()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &time)
    return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
}

/// Maps `events` round-robin for `seconds` of CPU time; returns events and notifications per CPU second.
func measure(_ events: [SourceEvent], seconds: Double) -> (events: Double, notifications: Double, payloadBytes: Int) {
    var mapped = 0
    var notifications = 0
    var payloadBytes = 0
    let start = threadCPUSeconds()
    while threadCPUSeconds() - start < seconds {
        for event in events {
            for mapping in router.map(event: event) {
                guard case .notifications(let list) = mapping.outcome else { fatalError("unexpected dead letter") }
                notifications += list.count
                payloadBytes &+= list[0].notification.payload.count
            }
        }
        mapped += events.count
    }
    let elapsed = threadCPUSeconds() - start
    return (Double(mapped) / elapsed, Double(notifications) / elapsed, payloadBytes)
}

if CommandLine.arguments.dropFirst().first == "--count" {
    let count = CommandLine.arguments.dropFirst(2).first.flatMap(Int.init) ?? 1_000_000
    let events = makeEvents(tokenCount: 1)
    var notifications = 0
    for index in 0..<count {
        notifications += router.map(event: events[index % events.count]).count
    }
    print("mapped \(count) events into \(notifications) mappings")
    exit(0)
}

/// Events Foundation's `JSONSerialization` parses per CPU second: the reference workload, measured in the
/// same rounds as the mapper. It does a part of the mapper's work (parsing the same event bytes), so the ratio
/// of the two rates says how the mapper compares with a standard parser, whatever the machine's speed.
func measureReference(_ events: [Data], seconds: Double) -> Double {
    var parsed = 0
    let start = threadCPUSeconds()
    while threadCPUSeconds() - start < seconds {
        for event in events {
            guard (try? JSONSerialization.jsonObject(with: event)) != nil else { fatalError("reference failed") }
        }
        parsed += events.count
    }
    return Double(parsed) / (threadCPUSeconds() - start)
}

/// Rounds of half a CPU second of mapping, each followed by a quarter second of the reference: the VM's cores
/// are shared with other tenants, and the same binary's rate moves by ±25% from one minute to the next, so
/// every round is kept and the median, best and worst are reported, with the reference measured alongside.
let roundSeconds = 0.5
let roundCount = max(1, Int((secondsPerScenario / roundSeconds).rounded()))

func median(_ values: [Double]) -> Double {
    values.sorted()[values.count / 2]
}

print(
    "MapperBench: example route `order-shipped` (config/pushbridge.yaml), one thread, \(roundCount) rounds of \(roundSeconds) CPU s per scenario"
)
for tokenCount in [1, 3] {
    let events = makeEvents(tokenCount: tokenCount)
    let referenceEvents = events.map { Data($0.value ?? []) }
    _ = measure(events, seconds: 0.3)  // warm-up
    _ = measureReference(referenceEvents, seconds: 0.1)
    var rates: [Double] = []
    var notificationRates: [Double] = []
    var referenceRates: [Double] = []
    var ratios: [Double] = []
    for _ in 0..<roundCount {
        let result = measure(events, seconds: roundSeconds)
        let reference = measureReference(referenceEvents, seconds: roundSeconds / 2)
        rates.append(result.events)
        notificationRates.append(result.notifications)
        referenceRates.append(reference)
        ratios.append(result.events / reference)
    }
    let eventBytes = events.reduce(0) { $0 + ($1.value?.count ?? 0) } / events.count
    print(
        String(
            format: "tokens/event=%d  event=%dB  events/s median=%.0f best=%.0f worst=%.0f  "
                + "notifications/s median=%.0f  (median %.2f µs/event)",
            tokenCount, eventBytes, median(rates), rates.max()!, rates.min()!, median(notificationRates),
            1e6 / median(rates)))
    print(
        String(
            format: "  reference: JSONSerialization parses median=%.0f events/s; mapper/reference median=%.2f "
                + "(%.2f-%.2f)",
            median(referenceRates), median(ratios), ratios.min()!, ratios.max()!))
}
