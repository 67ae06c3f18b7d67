#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Spool

/// The collector's NDJSON output: an append-only file, created with mode 0600, written with
/// one `write` per batch and synced when closed.
///
/// Its calls block: the collector only calls it from its own serial dispatch queue, never from
/// the cooperative pool. Not thread-safe.
final class OutputFile {
    let path: String
    private var descriptor: Int32

    /// Opens `path` for appending, creating it with mode 0600 if missing.
    init(path: String) throws {
        let descriptor = retryingOnInterrupt { open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600) }
        guard descriptor >= 0 else { throw Self.failure("open", path: path) }
        self.path = path
        self.descriptor = descriptor
    }

    deinit {
        if descriptor >= 0 { closeDescriptor(descriptor) }
    }

    /// Appends `bytes` (retrying short writes), so a batch lands in one piece: if any part
    /// cannot be written (a full disk), the file is cut back to its size before the call, so
    /// it only ever holds whole lines, each once (a retry of the batch writes them again).
    func append(_ bytes: [UInt8]) throws {
        precondition(descriptor >= 0, "OutputFile used after close")
        let before = lseek(descriptor, 0, SEEK_END)
        guard before >= 0 else { throw Self.failure("lseek", path: path) }
        do {
            try bytes.withUnsafeBytes { buffer in
                var offset = 0
                while offset < buffer.count {
                    let written = retryingOnInterrupt { write(descriptor, buffer.baseAddress! + offset, buffer.count - offset) }
                    guard written > 0 else { throw Self.failure("write", path: path) }
                    offset += written
                }
            }
        } catch {
            // Shrinking needs no space; the write's error is the one reported either way.
            _ = retryingOnInterrupt { ftruncate(descriptor, before) }
            throw error
        }
    }

    /// Makes what was appended durable, then closes the file. Later calls do nothing.
    func close() throws {
        guard descriptor >= 0 else { return }
        defer {
            closeDescriptor(descriptor)
            descriptor = -1
        }
        guard retryingOnInterrupt({ fsync(descriptor) }) == 0 else { throw Self.failure("fsync", path: path) }
    }

    private static func failure(_ operation: String, path: String) -> SpoolError {
        let code = errno
        let kind: SpoolError.Code = (code == ENOSPC || code == EDQUOT || code == EFBIG) ? .diskFull : .io
        return SpoolError(kind, "collector output \(operation) failed: \(String(cString: strerror(code)))", path: path)
    }
}

/// `close(2)`, out of reach of ``OutputFile/close()``'s name. Not retried on `EINTR`: on Linux
/// the descriptor is already released.
private func closeDescriptor(_ descriptor: Int32) {
    _ = close(descriptor)
}

private func retryingOnInterrupt<T: BinaryInteger>(_ call: () -> T) -> T {
    while true {
        let result = call()
        if result == -1 && errno == EINTR { continue }
        return result
    }
}
