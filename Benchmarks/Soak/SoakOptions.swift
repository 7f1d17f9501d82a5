import Foundation

/// The soak's command line: `Soak [--broker mock|tansu|kfake] [--rate N] [--duration S] ...` (docs/testing.md, "make soak").
struct SoakOptions {
    /// The Kafka side of the run.
    enum Broker: String {
        /// librdkafka 2.0.2's mock cluster, in the soak's own process (``SoakOptions/mockBrokerCount`` brokers).
        case mock
        /// Tansu 0.6.0 behind the real-broker lane's ApiVersions proxy (scripts/tansu-broker.py).
        case tansu
        /// franz-go's kfake, whose group coordinator follows Apache Kafka's (tools/kfake-broker, built by
        /// scripts/kfake-build.sh).
        case kfake
    }

    /// The broker (`--broker`).
    var broker = Broker.mock
    /// Events produced per second (`--rate`).
    var ratePerSecond = 100
    /// How long events are produced, in seconds (`--duration`); the schedule scales with it.
    var durationSeconds = 240
    /// Partitions of the input topic (`--partitions`).
    var partitionCount = 12
    /// How long every broker is down, in seconds (`--outage`).
    var outageSeconds = 5
    /// After the last event, how long to wait at most for the group's commits to reach the end offsets (`--settle`).
    var settleSeconds = 180
    /// Brokers of the mock cluster (`--mock-brokers`).
    var mockBrokerCount = 3
    /// The simulator's GOAWAY interval, streams per connection (`--goaway-after`).
    var goawayAfterStreams = 500
    /// The simulator's share of requests answered 503 (`--rate-503`).
    var rate503 = 0.02
    /// librdkafka properties for every instance's consumer (`kafka.consumer_properties`), from
    /// `--consumer-property K=V` (repeatable). `group.instance.id=V` gives instance N the ID `V-N`.
    var consumerProperties: [(String, String)] = []
    /// The release build of `pushbridge`.
    var pushbridgePath = ".build/release/pushbridge"
    /// Where each run writes its directory (configuration, logs, report).
    var directory = ".build/soak"
    /// The run's name: its directory and report file (default: the broker, the properties and the time).
    var name: String?
    /// `--mock-debug`: the mock cluster logs its `mock` debug context to `mock-debug.log` in the run's directory,
    /// and the report shows its consumer group's states (when a join began and completed, and why).
    var mockDebug = false

    /// The consumer property `name`, if given.
    func consumerProperty(_ name: String) -> String? {
        self.consumerProperties.last { $0.0 == name }?.1
    }

    static let usage = """
        usage: Soak [--broker mock|tansu|kfake] [--rate N] [--duration S] [--partitions N] [--outage S] [--settle S]
                    [--mock-brokers N] [--goaway-after N] [--rate-503 X] [--consumer-property K=V]...
                    [--pushbridge PATH] [--directory DIR] [--name NAME] [--mock-debug]
        """

    init(arguments: [String]) throws(SoakError) {
        var iterator = arguments.dropFirst().makeIterator()
        while let argument = iterator.next() {
            if argument == "--help" || argument == "-h" {
                throw SoakError(Self.usage)
            }
            if argument == "--mock-debug" {
                self.mockDebug = true
                continue
            }
            guard let value = iterator.next() else {
                throw SoakError("\(argument) needs a value\n\(Self.usage)")
            }
            switch argument {
            case "--broker":
                guard let broker = Broker(rawValue: value) else {
                    throw SoakError("--broker is mock, tansu or kfake, got \(value)\n\(Self.usage)")
                }
                self.broker = broker
            case "--consumer-property":
                guard let equals = value.firstIndex(of: "="), equals != value.startIndex else {
                    throw SoakError("--consumer-property needs K=V, got \(value)\n\(Self.usage)")
                }
                self.consumerProperties.append((String(value[..<equals]), String(value[value.index(after: equals)...])))
            case "--pushbridge": self.pushbridgePath = value
            case "--directory": self.directory = value
            case "--name": self.name = value
            case "--rate-503":
                guard let rate = Double(value), rate >= 0, rate <= 1 else {
                    throw SoakError("--rate-503 needs a share from 0 to 1, got \(value)")
                }
                self.rate503 = rate
            default:
                guard let number = Int(value), number >= 0 else {
                    throw SoakError("\(argument) needs a non-negative integer, got \(value)\n\(Self.usage)")
                }
                switch argument {
                case "--rate": self.ratePerSecond = max(1, number)
                case "--duration": self.durationSeconds = max(10, number)
                case "--partitions": self.partitionCount = max(1, number)
                case "--outage": self.outageSeconds = number
                case "--settle": self.settleSeconds = number
                case "--mock-brokers": self.mockBrokerCount = max(1, number)
                case "--goaway-after": self.goawayAfterStreams = number
                default: throw SoakError("unknown option \(argument)\n\(Self.usage)")
                }
            }
        }
    }
}

/// A failure that ends the soak, with what went wrong.
struct SoakError: Error, CustomStringConvertible {
    var description: String

    init(_ description: String) {
        self.description = description
    }
}
