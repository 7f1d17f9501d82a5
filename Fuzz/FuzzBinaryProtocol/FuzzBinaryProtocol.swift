// Fuzz target: the binary provider protocol's readers, as a gateway and a feedback client meet hostile bytes.
// The input's first byte picks how the rest is cut into pieces (1 + byte % 64 bytes each); the rest is fed to
// a BinaryFrameDecoder (the simulator's gateway side) and to a FeedbackReader, piece by piece. Checks:
// - the decoder returns the same results whether fed in pieces or at once, never holds more than one frame's
//   and every notification it returns has a 32-byte token and a payload within the limit;
// - an error packet parses from any 6 bytes starting with 8 and writes back the same bytes;
// - the feedback reader returns the same tuples in pieces as at once, each with a 1-100 byte token.

import BinaryProvider
import FuzzSupport

func fuzzOne(_ bytes: [UInt8]) {
    guard let first = bytes.first else { return }
    let piece = 1 + Int(first) % 64
    let stream = Array(bytes.dropFirst())

    var whole = BinaryFrameDecoder(payloadLimitBytes: 256)
    let all = whole.read(stream)
    var pieced = BinaryFrameDecoder(payloadLimitBytes: 256)
    var results: [BinaryFrameDecoder.Result] = []
    var start = 0
    while start < stream.count {
        results += pieced.read(stream[start..<min(stream.count, start + piece)])
        start += piece
    }
    precondition(results == all, "the decoder read differently in pieces of \(piece)")
    for case .success(let notification) in all {
        precondition(notification.token.count == BinaryFrame.deviceTokenBytes, "a decoded token is not 32 bytes")
        precondition(!notification.payload.isEmpty && notification.payload.count <= 256, "a payload out of bounds")
    }

    if stream.count >= BinaryErrorResponse.byteCount {
        let packet = Array(stream.prefix(BinaryErrorResponse.byteCount))
        if let response = BinaryErrorResponse(packet) {
            precondition(packet[0] == 8 && response.bytes == packet, "an error packet did not round-trip")
        } else {
            precondition(packet[0] != 8, "a packet starting with 8 did not parse")
        }
    }

    var feedbackWhole = FeedbackReader()
    let tuples = try? feedbackWhole.read(stream)
    var feedbackPieced = FeedbackReader()
    var piecedTuples: [FeedbackTuple]? = []
    start = 0
    while start < stream.count, piecedTuples != nil {
        do {
            piecedTuples! += try feedbackPieced.read(stream[start..<min(stream.count, start + piece)])
        } catch {
            piecedTuples = nil
        }
        start += piece
    }
    precondition((tuples == nil) == (piecedTuples == nil), "the feedback reader failed in one reading only")
    if let tuples, let piecedTuples {
        precondition(tuples == piecedTuples, "the feedback reader read differently in pieces of \(piece)")
        precondition(tuples.allSatisfy { (1...FeedbackReader.maxTokenBytes).contains($0.token.count) })
    }
}

#if PUSHBRIDGE_LIBFUZZER
    @_cdecl("LLVMFuzzerTestOneInput")
    public func fuzzerTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
        fuzzOne(size == 0 ? [] : Array(UnsafeBufferPointer(start: data, count: size)))
        return 0
    }
#else
    @main
    struct FuzzBinaryProtocolMain {
        static func main() {
            FuzzDriver.main(target: "FuzzBinaryProtocol", fuzzOne)
        }
    }
#endif
