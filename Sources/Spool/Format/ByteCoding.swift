/// Little-endian integer and varint coding over byte arrays, bounds-checked on read.
extension Array where Element == UInt8 {
    @inline(__always)
    mutating func appendLE<T: FixedWidthInteger>(_ value: T) {
        var v = value.littleEndian
        Swift.withUnsafeBytes(of: &v) { self.append(contentsOf: $0) }
    }

    @inline(__always)
    mutating func appendVarint(_ value: UInt64) {
        var v = value
        while v >= 0x80 {
            append(UInt8(truncatingIfNeeded: v) | 0x80)
            v >>= 7
        }
        append(UInt8(v))
    }

    /// Overwrites `T.bitWidth / 8` bytes at `offset` (which must be in bounds) with `value`, little-endian.
    @inline(__always)
    mutating func storeLE<T: FixedWidthInteger>(_ value: T, at offset: Int) {
        var v = value.littleEndian
        Swift.withUnsafeBytes(of: &v) { source in
            for i in 0..<source.count { self[offset + i] = source[i] }
        }
    }
}

/// ZigZag maps signed integers to unsigned ones so small magnitudes stay small varints.
@inline(__always) func zigzag(_ v: Int64) -> UInt64 { UInt64(bitPattern: (v << 1) ^ (v >> 63)) }
@inline(__always) func unzigzag(_ v: UInt64) -> Int64 { Int64(bitPattern: v >> 1) ^ -Int64(bitPattern: v & 1) }

/// Reads varints from a buffer; every read is bounds-checked
/// and returns nil past the end instead of trapping.
struct ByteReader {
    let bytes: UnsafeRawBufferPointer
    var offset: Int

    init(_ bytes: UnsafeRawBufferPointer, offset: Int = 0) {
        self.bytes = bytes
        self.offset = offset
    }

    var remaining: Int { bytes.count - offset }

    @inline(__always)
    mutating func readVarint() -> UInt64? {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        while offset < bytes.count {
            let byte = bytes[offset]
            offset += 1
            if shift == 63 && byte > 1 { return nil }
            result |= UInt64(byte & 0x7F) << shift
            if byte < 0x80 { return result }
            shift += 7
            if shift > 63 { return nil }
        }
        return nil
    }

    mutating func readBytes(_ count: Int) -> UnsafeRawBufferPointer? {
        guard count >= 0, remaining >= count else { return nil }
        let slice = UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + count])
        offset += count
        return slice
    }
}

/// Reads a little-endian integer at `offset` of a buffer known to be long enough.
@inline(__always)
func loadLE<T: FixedWidthInteger>(_ buffer: UnsafeRawBufferPointer, _ offset: Int, as: T.Type) -> T {
    T(littleEndian: buffer.loadUnaligned(fromByteOffset: offset, as: T.self))
}
