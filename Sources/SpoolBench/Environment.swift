import Foundation

/// What a run ran on: the machine, the disk under the measured directory, and the build.
/// Every report carries it, so a figure is never read without its hardware, and a comparison
/// with a baseline measured elsewhere says so (``differences(from:)``).
///
/// Read from Linux's `/proc` and `/sys`; a field this platform does not expose is `"unknown"`.
package struct Environment: Sendable, Codable, Equatable {
    /// The CPU's model name (`/proc/cpuinfo`) and the cores active for this process.
    package var cpu: String
    package var cores: Int
    /// Physical memory, in bytes.
    package var memoryBytes: UInt64
    /// The kernel's release (`/proc/sys/kernel/osrelease`).
    package var kernel: String
    /// The filesystem type, and the device it is mounted from, under the measured directory
    /// (`/proc/self/mountinfo`).
    package var filesystem: String
    package var device: String
    /// Whether that device is rotational (`/sys/dev/block/MAJOR:MINOR/…/queue/rotational`);
    /// nil when it is not a block device (tmpfs, overlay) or the file is missing.
    package var rotational: Bool?
    /// The Swift compiler that built this binary, and `"debug"` or `"release"`.
    package var swift: String
    package var build: String
    /// The commit (`git describe --always --dirty`) of the checkout this binary sits in, read
    /// when it runs; `"unknown"` for a binary outside a checkout. A binary built from another
    /// commit than the checkout's is not detected.
    package var commit: String

    /// The environment of this process, measuring under `directory`. Blocking: it reads
    /// `/proc` and `/sys` and runs `git`.
    package static func current(directory: String) -> Environment {
        let mount = mountInfo(of: directory)
        return Environment(
            cpu: cpuModel(), cores: ProcessInfo.processInfo.activeProcessorCount,
            memoryBytes: ProcessInfo.processInfo.physicalMemory,
            kernel: firstLine("/proc/sys/kernel/osrelease") ?? ProcessInfo.processInfo.operatingSystemVersionString,
            filesystem: mount?.type ?? "unknown", device: mount?.source ?? "unknown",
            rotational: mount.flatMap { isRotational(device: $0.device) },
            swift: compilerVersion, build: buildMode, commit: checkoutCommit())
    }

    /// The fields, by name, that differ from `other`'s; the commit is left out (it is what a
    /// comparison usually measures).
    package func differences(from other: Environment) -> [String] {
        let fields: [(String, String, String)] = [
            ("cpu", cpu, other.cpu), ("cores", "\(cores)", "\(other.cores)"),
            ("memory", "\(memoryBytes)", "\(other.memoryBytes)"), ("kernel", kernel, other.kernel),
            ("filesystem", filesystem, other.filesystem), ("device", device, other.device),
            ("rotational", "\(rotational.map(String.init) ?? "unknown")", "\(other.rotational.map(String.init) ?? "unknown")"),
            ("swift", swift, other.swift), ("build", build, other.build),
        ]
        return fields.filter { $0.1 != $0.2 }.map { "\($0.0): \($0.2) → \($0.1)" }
    }

    /// One line for the table's header.
    package var summary: String {
        let memory = String(format: "%.1f GiB", Double(memoryBytes) / Double(1 << 30))
        let disk = rotational.map { $0 ? "rotational" : "non-rotational" } ?? "not a block device"
        return "\(cpu), \(cores) cores, \(memory); Linux \(kernel); \(filesystem) on \(device) (\(disk)); "
            + "Swift \(swift) \(build) build; commit \(commit)"
    }
}

private var buildMode: String {
    #if DEBUG
    "debug"
    #else
    "release"
    #endif
}

private var compilerVersion: String {
    #if compiler(>=6.4)
    "6.4 or later"
    #elseif compiler(>=6.3)
    "6.3"
    #elseif compiler(>=6.2)
    "6.2"
    #else
    "before 6.2"
    #endif
}

private func firstLine(_ path: String) -> String? {
    (try? String(contentsOfFile: path, encoding: .utf8))?.split(separator: "\n").first.map(String.init)
}

private func cpuModel() -> String {
    guard let info = try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8) else { return "unknown" }
    let line = info.split(separator: "\n").first { $0.hasPrefix("model name") }
    return line?.split(separator: ":", maxSplits: 1).last.map { $0.trimmingCharacters(in: .whitespaces) } ?? "unknown"
}

/// The mount holding `directory` (the longest mount point that prefixes its real path).
private func mountInfo(of directory: String) -> (type: String, source: String, device: String)? {
    guard let table = try? String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8) else { return nil }
    let path = URL(fileURLWithPath: directory).resolvingSymlinksInPath().path
    var best: (point: String, type: String, source: String, device: String)?
    for line in table.split(separator: "\n") {
        // ID PARENT MAJOR:MINOR ROOT MOUNTPOINT OPTIONS [OPTIONAL…] - TYPE SOURCE SUPEROPTIONS
        let fields = line.split(separator: " ").map(String.init)
        guard fields.count > 6, let dash = fields.firstIndex(of: "-"), dash + 2 < fields.count else { continue }
        let point = fields[4].replacingOccurrences(of: "\\040", with: " ")
        let inside = point == "/" || path == point || path.hasPrefix(point + "/")
        if inside, point.count >= (best?.point.count ?? -1) {
            best = (point, fields[dash + 1], fields[dash + 2], fields[2])
        }
    }
    return best.map { ($0.type, $0.source, $0.device) }
}

/// Whether the block device `MAJOR:MINOR` is rotational: its own queue's flag, or for a
/// partition its disk's.
private func isRotational(device: String) -> Bool? {
    let base = URL(fileURLWithPath: "/sys/dev/block/\(device)").resolvingSymlinksInPath()
    for directory in [base, base.deletingLastPathComponent()] {
        if let flag = firstLine(directory.appendingPathComponent("queue/rotational").path) { return flag == "1" }
    }
    return nil
}

/// `git describe --always --dirty` in the directory of this executable, or "unknown".
private func checkoutCommit() -> String {
    let git = Process()
    git.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    git.arguments = ["git", "describe", "--always", "--dirty", "--abbrev=12"]
    guard let executable = Bundle.main.executableURL else { return "unknown" }
    git.currentDirectoryURL = executable.resolvingSymlinksInPath().deletingLastPathComponent()
    let output = Pipe()
    git.standardOutput = output
    git.standardError = FileHandle.nullDevice
    guard (try? git.run()) != nil else { return "unknown" }
    let data = output.fileHandleForReading.readDataToEndOfFile()
    git.waitUntilExit()
    guard git.terminationStatus == 0 else { return "unknown" }
    return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
}
