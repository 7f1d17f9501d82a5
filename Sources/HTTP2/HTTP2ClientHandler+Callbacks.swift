import CNghttp2
import Logging
import NIOCore
import NIOSSL
import NIOTLS
import Synchronization

// The client handler's nghttp2 callbacks: C functions; the handler comes back through user_data.

/// Calls `body` with the handler `userData` points to, without retaining it: nghttp2 calls back only from inside the
/// handler's own calls into the session, so the handler is alive throughout (a retain and a release per callback,
/// several per response, otherwise).
func withClientHandler<Result>(
    _ userData: UnsafeMutableRawPointer?, _ body: (HTTP2ClientHandler) -> Result
) -> Result {
    Unmanaged<HTTP2ClientHandler>.fromOpaque(userData!)._withUnsafeGuaranteedRef(body)
}

func installClientCallbacks(_ callbacks: OpaquePointer) {
    nghttp2_session_callbacks_set_on_header_callback(callbacks) {
        _, frame, name, nameLength, value, valueLength, _, userData in
        guard let frame, frame.pointee.hd.type == UInt8(NGHTTP2_HEADERS.rawValue) else { return 0 }
        let accepted = withClientHandler(userData) {
            $0.responseHeader(
                streamID: frame.pointee.hd.stream_id,
                name: UnsafeBufferPointer(start: name, count: nameLength),
                value: UnsafeBufferPointer(start: value, count: valueLength))
        }
        // TEMPORAL_CALLBACK_FAILURE resets this stream only (RST_STREAM INTERNAL_ERROR); the connection lives on.
        return accepted ? 0 : NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue
    }
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks) {
        _, _, streamID, data, length, userData in
        withClientHandler(userData) {
            $0.responseData(streamID: streamID, UnsafeBufferPointer(start: data, count: length))
        }
        return 0
    }
    nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks) { _, frame, userData in
        guard let frame else { return 0 }
        withClientHandler(userData) { handler in
            let flags = frame.pointee.hd.flags
            switch UInt32(frame.pointee.hd.type) {
            case NGHTTP2_SETTINGS.rawValue where flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) == 0:
                handler.settingsReceived()
            case NGHTTP2_GOAWAY.rawValue:
                let goAway = frame.pointee.goaway
                let debugData =
                    goAway.opaque_data_len > 0
                    ? Array(UnsafeBufferPointer(start: goAway.opaque_data, count: goAway.opaque_data_len)) : []
                handler.goAwayReceived(
                    HTTP2GoAway(
                        lastStreamID: goAway.last_stream_id,
                        errorCode: HTTP2ErrorCode(goAway.error_code),
                        debugData: debugData
                    )
                )
            case NGHTTP2_PING.rawValue where flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) != 0:
                handler.pingAcknowledged()
            default:
                break
            }
        }
        return 0
    }
    nghttp2_session_callbacks_set_on_stream_close_callback(callbacks) { _, streamID, errorCode, userData in
        withClientHandler(userData) { $0.streamClosed(streamID: streamID, errorCode: HTTP2ErrorCode(errorCode)) }
        return 0
    }
    nghttp2_session_callbacks_set_on_frame_send_callback(callbacks) { _, frame, userData in
        guard let frame, frame.pointee.hd.type == UInt8(NGHTTP2_GOAWAY.rawValue) else { return 0 }
        withClientHandler(userData) { $0.goAwaySent(errorCode: HTTP2ErrorCode(frame.pointee.goaway.error_code)) }
        return 0
    }
    nghttp2_session_callbacks_set_on_frame_not_send_callback(callbacks) { _, frame, reason, userData in
        guard let frame, frame.pointee.hd.type == UInt8(NGHTTP2_HEADERS.rawValue) else { return 0 }
        withClientHandler(userData) { $0.requestNotSent(streamID: frame.pointee.hd.stream_id, reason: reason) }
        return 0
    }
}
