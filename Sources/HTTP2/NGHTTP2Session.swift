// The thin layer over one `nghttp2_session` shared by the client and the server handlers: creation, feeding
// inbound bytes, draining outbound bytes into one ByteBuffer per event-loop tick, header blocks and DATA bodies.
// Everything here runs on the channel's event loop.

import CNghttp2
import NIOCore

/// An object whose bytes nghttp2 pulls as a DATA frame body (a client request, a server response).
class OutgoingBody {
    /// The body to send.
    final var body: [UInt8] = []
    /// How much of `body` nghttp2 has already taken.
    final var bodyOffset = 0
}

/// nghttp2's DATA source callback: copies the next part of an ``OutgoingBody`` (passed unretained as
/// `source.ptr`; the owner keeps it alive until the stream closes).
private let bodyReadCallback: nghttp2_data_source_read_callback = {
    _, _, buffer, length, dataFlags, source, _ in
    guard let source, let pointer = source.pointee.ptr, let buffer, let dataFlags else {
        return Int(NGHTTP2_ERR_CALLBACK_FAILURE.rawValue)
    }
    let outgoing = Unmanaged<OutgoingBody>.fromOpaque(pointer).takeUnretainedValue()
    let count = min(outgoing.body.count - outgoing.bodyOffset, length)
    if count > 0 {
        outgoing.body.withUnsafeBufferPointer { bytes in
            buffer.update(from: bytes.baseAddress! + outgoing.bodyOffset, count: count)
        }
    }
    outgoing.bodyOffset += count
    if outgoing.bodyOffset >= outgoing.body.count {
        dataFlags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue
    }
    return count
}

/// Builds nghttp2 header blocks in reusable scratch storage, so a request costs no allocation here once warm.
struct HeaderBlockBuilder {
    private var bytes: [UInt8] = []
    private var entries: [(name: Range<Int>, value: Range<Int>, flags: UInt8)] = []
    private var nameValues: [nghttp2_nv] = []
    /// Names already sent once with `.nameOnce` on this session (a handful at most).
    private var namesIndexedOnce: [[UInt8]] = []

    /// Empties the block, keeping capacity.
    mutating func reset() {
        self.bytes.removeAll(keepingCapacity: true)
        self.entries.removeAll(keepingCapacity: true)
    }

    /// Appends one field.
    mutating func add(_ name: String, _ value: String, indexing: HTTP2HeaderIndexing = .incremental) {
        let nameStart = self.bytes.count
        self.appendUTF8(name)
        let valueStart = self.bytes.count
        self.appendUTF8(value)
        let flags = name.withHeaderBytes { self.flags(indexing, name: $0) }
        self.entries.append((nameStart..<valueStart, valueStart..<self.bytes.count, flags))
    }

    /// nghttp2's flags for a field of `name` with `indexing` on this session.
    private mutating func flags(_ indexing: HTTP2HeaderIndexing, name: UnsafeBufferPointer<UInt8>) -> UInt8 {
        switch indexing {
        case .incremental:
            return UInt8(NGHTTP2_NV_FLAG_NONE.rawValue)
        case .never:
            return UInt8(NGHTTP2_NV_FLAG_NO_INDEX.rawValue)
        case .nameOnce:
            if self.namesIndexedOnce.contains(where: { $0.elementsEqual(name) }) {
                return UInt8(NGHTTP2_NV_FLAG_NO_INDEX.rawValue)
            }
            self.namesIndexedOnce.append(Array(name))
            return UInt8(NGHTTP2_NV_FLAG_NONE.rawValue)
        }
    }

    /// Copies the bytes of `text` in one go (appending `text.utf8` went through the generic sequence copy, with
    /// the string retained on the way, for each of a request's dozen fields).
    private mutating func appendUTF8(_ text: String) {
        text.withHeaderBytes { self.bytes.append(contentsOf: $0) }
    }

    /// Calls `body` with the block, then the fields of `more`, as an `nghttp2_nv` array (valid only during the
    /// call; nghttp2 copies it). `more`'s names and values are pointed at where they are, not copied.
    mutating func withNameValues<Result>(
        appending more: HTTP2HeaderBlock = HTTP2HeaderBlock(), _ body: (UnsafePointer<nghttp2_nv>?, Int) -> Result
    ) -> Result {
        self.nameValues.removeAll(keepingCapacity: true)
        for field in more.fields {
            // The flags first: deciding them may record the name on the session.
            let name = UnsafeBufferPointer(start: field.name.utf8Start, count: field.name.utf8CodeUnitCount)
            self.moreFlags.append(self.flags(field.indexing, name: name))
        }
        defer { self.moreFlags.removeAll(keepingCapacity: true) }
        return self.bytes.withUnsafeBufferPointer { raw in
            let base = UnsafeMutablePointer(mutating: raw.baseAddress)
            for entry in self.entries {
                self.nameValues.append(
                    nghttp2_nv(
                        name: base.map { $0 + entry.name.lowerBound },
                        value: base.map { $0 + entry.value.lowerBound },
                        namelen: entry.name.count,
                        valuelen: entry.value.count,
                        flags: entry.flags
                    )
                )
            }
            return more.values.withUnsafeBufferPointer { values in
                let valueBase = UnsafeMutablePointer(mutating: values.baseAddress)
                for (index, field) in more.fields.enumerated() {
                    self.nameValues.append(
                        nghttp2_nv(
                            name: UnsafeMutablePointer(mutating: field.name.utf8Start),
                            value: valueBase.map { $0 + field.value.lowerBound },
                            namelen: field.name.utf8CodeUnitCount,
                            valuelen: field.value.count,
                            flags: self.moreFlags[index]
                        )
                    )
                }
                return self.nameValues.withUnsafeBufferPointer { body($0.baseAddress, $0.count) }
            }
        }
    }

    /// Scratch: the flags of the appended block's fields.
    private var moreFlags: [UInt8] = []
}

/// One nghttp2 session (client or server) and the scratch state used to talk to it.
final class NGHTTP2Session {
    /// The C session; deleted in `deinit`.
    let pointer: OpaquePointer
    /// Scratch header block.
    var headerBlock = HeaderBlockBuilder()

    /// Creates a session whose callbacks receive `userData` (the owning handler, unretained: the handler owns
    /// this session, so it outlives every callback).
    init(
        server: Bool, acknowledgesPings: Bool = true, userData: UnsafeMutableRawPointer,
        configure: (OpaquePointer) -> Void
    ) {
        var callbacks: OpaquePointer?
        precondition(nghttp2_session_callbacks_new(&callbacks) == 0, "nghttp2: out of memory")
        configure(callbacks!)
        var option: OpaquePointer?
        precondition(nghttp2_option_new(&option) == 0, "nghttp2: out of memory")
        // Client streams above the server's SETTINGS_MAX_CONCURRENT_STREAMS are held back by us, not by nghttp2;
        // nghttp2 additionally never exceeds it.
        nghttp2_option_set_peer_max_concurrent_streams(option, 100)
        if !acknowledgesPings { nghttp2_option_set_no_auto_ping_ack(option, 1) }
        var session: OpaquePointer?
        let result =
            server
            ? nghttp2_session_server_new2(&session, callbacks, userData, option)
            : nghttp2_session_client_new2(&session, callbacks, userData, option)
        nghttp2_option_del(option)
        nghttp2_session_callbacks_del(callbacks)
        precondition(result == 0 && session != nil, "nghttp2: cannot create a session (\(result))")
        self.pointer = session!
    }

    deinit {
        nghttp2_session_del(self.pointer)
    }

    /// Submits SETTINGS: `maxConcurrentStreams` (server) or push disabled (client), a 1 MiB stream window and a
    /// 16 MiB connection window, so many small streams do not stall on WINDOW_UPDATEs.
    func submitSettings(maxConcurrentStreams: Int?, maxHeaderListBytes: Int? = nil) {
        var settings: [nghttp2_settings_entry] = [
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE.rawValue), value: 1 << 20)
        ]
        if let maxConcurrentStreams {
            settings.append(
                nghttp2_settings_entry(
                    settings_id: Int32(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS.rawValue),
                    value: UInt32(clamping: maxConcurrentStreams)
                )
            )
        } else {
            settings.append(nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_ENABLE_PUSH.rawValue), value: 0))
        }
        if let maxHeaderListBytes {
            // Advisory for the peer; the handlers enforce it themselves in their header callbacks.
            settings.append(
                nghttp2_settings_entry(
                    settings_id: Int32(NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE.rawValue),
                    value: UInt32(clamping: maxHeaderListBytes)
                )
            )
        }
        _ = nghttp2_submit_settings(self.pointer, UInt8(NGHTTP2_FLAG_NONE.rawValue), settings, settings.count)
        _ = nghttp2_session_set_local_window_size(self.pointer, UInt8(NGHTTP2_FLAG_NONE.rawValue), 0, 16 << 20)
    }

    /// A DATA provider for `body`, or `nil` when it is empty (the HEADERS frame then ends the stream).
    static func dataProvider(for body: OutgoingBody) -> nghttp2_data_provider? {
        guard !body.body.isEmpty else { return nil }
        return nghttp2_data_provider(
            source: nghttp2_data_source(ptr: Unmanaged.passUnretained(body).toOpaque()),
            read_callback: bodyReadCallback
        )
    }

    /// Feeds inbound bytes; returns nil, or nghttp2's error when the peer broke the protocol.
    func receive(_ buffer: ByteBuffer) -> NGHTTP2Failure? {
        let result = buffer.withUnsafeReadableBytes { raw in
            nghttp2_session_mem_recv(self.pointer, raw.bindMemory(to: UInt8.self).baseAddress, raw.count)
        }
        return result < 0 ? NGHTTP2Failure(code: Int32(result)) : nil
    }

    /// Everything nghttp2 wants to send, as one buffer, or nil when there is nothing. `error` is set when
    /// nghttp2 failed (the connection must close).
    func pendingOutput(allocator: ByteBufferAllocator, error: inout String?) -> ByteBuffer? {
        var output: ByteBuffer?
        while true {
            var data: UnsafePointer<UInt8>?
            let count = nghttp2_session_mem_send(self.pointer, &data)
            if count < 0 {
                error = Self.errorText(Int32(count))
                break
            }
            guard count > 0, let data else { break }
            if output == nil { output = allocator.buffer(capacity: max(count, 16 * 1024)) }
            output!.writeBytes(UnsafeRawBufferPointer(start: data, count: count))
        }
        return output
    }

    /// Whether the session has nothing more to read or write (both sides finished after GOAWAY).
    var isFinished: Bool {
        nghttp2_session_want_read(self.pointer) == 0 && nghttp2_session_want_write(self.pointer) == 0
    }

    /// Resets a stream.
    func reset(streamID: Int32, errorCode: HTTP2ErrorCode) {
        _ = nghttp2_submit_rst_stream(self.pointer, UInt8(NGHTTP2_FLAG_NONE.rawValue), streamID, errorCode.rawValue)
    }

    /// Submits GOAWAY.
    func submitGoAway(lastStreamID: Int32, errorCode: HTTP2ErrorCode, debugData: [UInt8]) {
        _ = debugData.withUnsafeBufferPointer { bytes in
            nghttp2_submit_goaway(
                self.pointer, UInt8(NGHTTP2_FLAG_NONE.rawValue), lastStreamID, errorCode.rawValue,
                bytes.baseAddress, bytes.count
            )
        }
    }

    /// nghttp2's text for an error code.
    static func errorText(_ code: Int32) -> String {
        String(cString: nghttp2_strerror(code))
    }
}

/// An error code nghttp2 returned, as an `Error` for the log calls' `error:` parameter; it describes itself in
/// nghttp2's words (`nghttp2_strerror`).
struct NGHTTP2Failure: Error, CustomStringConvertible {
    /// nghttp2's (negative) error code, `NGHTTP2_ERR_*`.
    var code: Int32

    var description: String { NGHTTP2Session.errorText(self.code) }
}

/// The name and value of one header callback, decoded.
@inline(__always)
func headerString(_ pointer: UnsafePointer<UInt8>?, _ count: Int) -> String {
    String(decoding: UnsafeBufferPointer(start: pointer, count: count), as: UTF8.self)
}
