#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A TCP socket bound to 127.0.0.1 on a port the system chose, listening with `backlog`
/// pending connections when given. The caller owns the descriptor and closes it.
///
/// The one place the benchmark's and the tests' servers (and their free ports) come from.
package func loopbackSocket(listen backlog: Int32? = nil) throws -> (descriptor: Int32, port: Int) {
    #if canImport(Glibc)
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    #else
    let fd = socket(AF_INET, SOCK_STREAM, 0)
    #endif
    guard fd >= 0 else { throw ServerError("socket failed: errno \(errno)") }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
            bind(fd, address, length) == 0 && (backlog.map { listen(fd, $0) == 0 } ?? true)
                && getsockname(fd, address, &length) == 0
        }
    }
    guard bound else {
        let error = errno
        close(fd)
        throw ServerError("binding a socket on 127.0.0.1 failed: errno \(error)")
    }
    return (fd, Int(UInt16(bigEndian: address.sin_port)))
}

/// A TCP port on 127.0.0.1 that was free a moment ago (bound to port 0, then released), for a
/// server started by another process (the Pub/Sub emulator, PostgreSQL, nginx, a collector).
package func freePort() throws -> Int {
    let (fd, port) = try loopbackSocket()
    close(fd)
    return port
}
