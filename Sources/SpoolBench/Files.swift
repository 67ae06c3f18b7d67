#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation

/// The scratch directory of a run: every scenario gets its own subdirectory, removed when
/// the scenario ends, so each starts from an empty disk state.
struct Scratch: Sendable {
    /// The root, which must be on the disk to be measured.
    let root: String

    /// Makes (if needed) `root`, or a fresh directory under the system's temporary
    /// directory when `root` is nil.
    init(root: String?) throws {
        let path = root ?? (NSTemporaryDirectory() + "spool-bench-\(getpid())")
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        self.root = path
    }

    /// A new, empty directory named `name` (emptied first if it exists).
    func fresh(_ name: String) throws -> String {
        let path = root + "/" + name
        try? FileManager.default.removeItem(atPath: path)
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    /// Removes `path` and everything under it, ignoring a missing path.
    func remove(_ path: String) {
        try? FileManager.default.removeItem(atPath: path)
    }

    /// Removes the whole scratch root.
    func removeAll() {
        try? FileManager.default.removeItem(atPath: root)
    }
}

/// The bytes on disk under `path`: the sum of regular files' sizes (apparent sizes, what a
/// user sees in `ls`; file-system block rounding is left out for both sides).
package func bytesOnDisk(_ path: String) -> Int {
    guard let walker = FileManager.default.enumerator(atPath: path) else { return 0 }
    var total = 0
    while let name = walker.nextObject() as? String {
        var info = stat()
        if stat(path + "/" + name, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG {
            total += Int(info.st_size)
        }
    }
    return total
}

/// This process's resident set size and its peak, in bytes, from `/proc/self/status`
/// (nil elsewhere).
func residentMemory() -> (current: Int, peak: Int)? {
    guard let text = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return nil }
    var current = 0, peak = 0
    for line in text.split(separator: "\n") {
        let parts = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
        guard parts.count >= 2, let kib = Int(parts[1]) else { continue }
        if parts[0] == "VmRSS:" { current = kib * 1024 }
        if parts[0] == "VmHWM:" { peak = kib * 1024 }
    }
    return (current, peak)
}

/// Resets the kernel's peak-RSS counter of this process (`echo 5 > /proc/self/clear_refs`,
/// Linux ≥ 4.0), so the next ``residentMemory()`` peak covers only what follows.
func resetPeakMemory() {
    let fd = open("/proc/self/clear_refs", O_WRONLY)
    guard fd >= 0 else { return }
    _ = write(fd, "5", 1)
    close(fd)
}

/// The 1-, 5- and 15-minute load averages, to show how busy the (shared) machine was.
func loadAverage() -> String {
    Load.averages()?.joined(separator: " ") ?? "n/a"
}

/// Cuts `bytes` off the end of the newest segment (`*.seg`, the highest base seq) in
/// `directory`, as a crash in the middle of writing its last block would. Returns the
/// segment's size before the cut.
func tearNewestSegment(in directory: String, by bytes: Int) throws -> Int64 {
    let (path, size) = try newestSegment(in: directory)
    try check(truncate(path, max(0, off_t(size) - off_t(bytes))), "truncate", path)
    return size
}

/// The path and size of the newest segment (`*.seg`, the highest base seq) in `directory`.
func newestSegment(in directory: String) throws -> (path: String, size: Int64) {
    let names = try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasSuffix(".seg") }.sorted()
    guard let newest = names.last else { throw BenchError("no segment in \(directory)") }
    let path = directory + "/" + newest
    var info = stat()
    try check(stat(path, &info), "stat", path)
    return (path, Int64(info.st_size))
}
