import Foundation

/// A TCP port on 127.0.0.1 that refuses every connection for as long as this object lives: a socket is bound to it
/// and never listens, so a connection attempt is answered with a reset (`ECONNREFUSED`).
///
/// A test of "nothing listening" must not close a server and then connect to its port: in the parallel suite another
/// test's server can be given that port in between, and the client then reaches a stranger (it happened under
/// `make test-stress`: a channel-management client got an answer instead of `unreachable`). While this socket holds
/// the port, nothing else can bind it.
package final class RefusingPort: Sendable {
    /// The port.
    package let port: Int
    private let descriptor: Int32

    /// Binds a socket to an ephemeral port of 127.0.0.1, without listening.
    package init() throws {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw SocketFailed(call: "socket", errno: errno) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, length) }
        }
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        guard bound == 0, named == 0 else {
            let failed = SocketFailed(call: bound == 0 ? "getsockname" : "bind", errno: errno)
            close(descriptor)
            throw failed
        }
        self.descriptor = descriptor
        self.port = Int(UInt16(bigEndian: address.sin_port))
    }

    deinit {
        close(self.descriptor)
    }

    /// A socket call failed.
    package struct SocketFailed: Error {
        package var call: String
        package var errno: Int32
    }
}
