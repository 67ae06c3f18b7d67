import CISAL

/// CRC-32C (Castagnoli), the checksum of every block, header and offset slot.
///
/// Computed by Intel's ISA-L (`crc32_iscsi`, hardware-accelerated), never by a
/// hand-written table. `crc32_iscsi` neither pre- nor post-inverts, so the standard
/// CRC-32C (initial value 0xFFFFFFFF, final XOR 0xFFFFFFFF) is `~crc32_iscsi(data, ~0)`.
/// The check value CRC-32C("123456789") is 0xE3069283.
enum CRC32C {
    /// The CRC-32C of `bytes`, continuing from `previous` (0 for a fresh checksum).
    @inline(__always)
    static func checksum(_ bytes: UnsafeRawBufferPointer, continuing previous: UInt32 = 0) -> UInt32 {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return previous }
        let mutable = UnsafeMutablePointer(mutating: base.assumingMemoryBound(to: UInt8.self))
        return ~crc32_iscsi(mutable, Int32(bytes.count), ~previous)
    }

    static func checksum(_ bytes: [UInt8]) -> UInt32 {
        bytes.withUnsafeBytes { checksum($0) }
    }
}
