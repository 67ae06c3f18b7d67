#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Synchronization
import SystemPackage

/// Thin wrappers over the system calls Spool uses. Every call retries `EINTR`, passes
/// through the ``FaultInjection`` seam, and throws a ``SpoolError`` naming the path
/// and the operation. Blocking: call only from the writer thread or a blocking-I/O queue.
struct FileIO {
    let fd: FileDescriptor
    let path: String

    enum Mode { case readOnly, readWrite, createNew(permissions: UInt16) }

    static func open(_ path: String, _ mode: Mode) throws -> FileIO {
        if case .error(let errno) = FaultInjection.check(.open, path: path) {
            throw SpoolError.system("open", path: path, errno)
        }
        do {
            // Non-blocking: opening a FIFO someone left under a log file's name would otherwise
            // wait for a writer for ever (it has no effect on a regular file's I/O). No link is
            // followed: a symbolic link planted under a log file's name must not make Spool
            // read, cut or rewrite a file outside the log directory. The path goes to `open` as
            // a C string, not a `FilePath`: building one normalises the string character by
            // character, which in a debug build made the opens of live readers (a segment per
            // refresh) 5% of the CLI tests' CPU.
            let fd = try path.withCString { cPath in
                switch mode {
                case .readOnly:
                    try FileDescriptor.open(cPath, .readOnly, options: [.closeOnExec, .nonBlocking, .noFollow], retryOnInterrupt: true)
                case .readWrite:
                    try FileDescriptor.open(cPath, .readWrite, options: [.closeOnExec, .nonBlocking, .noFollow], retryOnInterrupt: true)
                case .createNew(let permissions):
                    try FileDescriptor.open(cPath, .readWrite, options: [.create, .exclusiveCreate, .closeOnExec, .noFollow],
                                            permissions: FilePermissions(rawValue: CModeT(permissions)), retryOnInterrupt: true)
                }
            }
            var info = stat()
            guard fstat(fd.rawValue, &info) == 0, info.st_mode & S_IFMT == S_IFREG else {
                try? fd.close()
                throw SpoolError(.io, "is not a regular file (Spool keeps its data in regular files only; move it aside)", path: path)
            }
            return FileIO(fd: fd, path: path)
        } catch let errno as Errno {
            throw errno == .tooManySymbolicLinkLevels ? SpoolError.symbolicLink(path) : SpoolError.system("open", path: path, errno)
        }
    }

    func close() {
        try? fd.close()
    }

    /// The size of the file at `path`, learned by opening it: a file this process cannot read
    /// (or that is not a regular file) fails here, naming it, rather than at a later read.
    static func size(of path: String) throws -> Int64 {
        let file = try open(path, .readOnly)
        defer { file.close() }
        return try file.size()
    }

    /// The file's size in bytes.
    func size() throws -> Int64 {
        var info = stat()
        guard fstat(fd.rawValue, &info) == 0 else { throw SpoolError.system("fstat", path: path, Errno(rawValue: errno)) }
        return Int64(info.st_size)
    }

    /// Writes all of `bytes` at `offset`, looping over short writes.
    func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws {
        var written = 0
        var limit = bytes.count
        switch FaultInjection.check(.write, path: path) {
        case .error(let errno)?: throw SpoolError.system("write", path: path, errno)
        case .shortWrite(let count)?: limit = min(count, bytes.count)
        case .delay(let duration)?: usleep(useconds_t(clamping: duration.wholeNanoseconds / 1_000))
        case .hold?, nil: break  // a gate holds syncs only
        }
        while written < limit {
            do {
                let n = try fd.writeAll(toAbsoluteOffset: offset + Int64(written),
                                        UnsafeRawBufferPointer(rebasing: bytes[written..<limit]))
                written += n
            } catch let errno as Errno {
                throw SpoolError.system("write", path: path, errno)
            }
        }
        if limit < bytes.count {
            throw SpoolError.system("write", path: path, .noSpace)
        }
    }

    func write(_ bytes: [UInt8], at offset: Int64) throws {
        try bytes.withUnsafeBytes { try write($0, at: offset) }
    }

    /// Reads up to `count` bytes at `offset`; fewer only at the end of the file.
    func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws -> Int {
        if case .error(let errno) = FaultInjection.check(.read, path: path) {
            throw SpoolError.system("read", path: path, errno)
        }
        var total = 0
        while total < buffer.count {
            let n: Int
            do {
                n = try fd.read(fromAbsoluteOffset: offset + Int64(total),
                                into: UnsafeMutableRawBufferPointer(rebasing: buffer[total...]), retryOnInterrupt: true)
            } catch let errno as Errno {
                throw SpoolError.system("read", path: path, errno)
            }
            if n == 0 { break }
            total += n
        }
        return total
    }

    func read(count: Int, at offset: Int64) throws -> [UInt8] {
        var out = [UInt8](repeating: 0, count: count)
        let n = try out.withUnsafeMutableBytes { try read(into: $0, at: offset) }
        out.removeLast(count - n)
        return out
    }

    /// Makes the file's data durable: `fdatasync` on Linux, `fcntl(F_FULLFSYNC)` on Apple platforms
    /// (where `fsync` does not flush the drive's cache).
    func syncData() throws {
        // What the tracker records is what the file held when the sync began: a write another
        // thread makes while it runs (the pipeline) may or may not be made durable by it.
        let tracked = FaultInjection.isTracked(path) ? snapshotForTracker() : nil
        switch FaultInjection.check(.sync, path: path) {
        case .error(let errno)?: throw SpoolError.system("fdatasync", path: path, errno)
        case .delay(let duration)?: usleep(useconds_t(clamping: duration.wholeNanoseconds / 1_000))
        case .hold(let gate)?:
            if let errno = gate.pass() { throw SpoolError.system("fdatasync", path: path, errno) }
        case .shortWrite?, nil: break
        }
        while true {
            #if canImport(Darwin)
            let result = fcntl(fd.rawValue, F_FULLFSYNC)
            #else
            let result = fdatasync(fd.rawValue)
            #endif
            if result == 0 { break }
            let error = Errno(rawValue: errno)
            if error == .interrupted { continue }
            throw SpoolError.system("fdatasync", path: path, error)
        }
        if let tracked {
            FaultInjection.recordFileSync(path: path, inode: tracked.inode, size: tracked.size, bytes: tracked.bytes)
        }
    }

    /// What a successful sync starting now makes durable, for the sync tracker (tests only).
    private func snapshotForTracker() -> (inode: UInt64, size: Int64, bytes: [UInt8]?)? {
        var info = stat()
        guard fstat(fd.rawValue, &info) == 0 else { return nil }
        var bytes: [UInt8]?
        if FaultInjection.recordsBytes(of: path, size: Int(info.st_size)) {
            var buffer = [UInt8](repeating: 0, count: Int(info.st_size))
            let n = buffer.withUnsafeMutableBytes { (try? fd.read(fromAbsoluteOffset: 0, into: $0)) ?? -1 }
            bytes = n == buffer.count ? buffer : nil
        }
        return (UInt64(info.st_ino), Int64(info.st_size), bytes)
    }

    func truncate(to size: Int64) throws {
        if case .error(let errno) = FaultInjection.check(.truncate, path: path) {
            throw SpoolError.system("ftruncate", path: path, errno)
        }
        do {
            try fd.resize(to: size, retryOnInterrupt: true)
        } catch let errno as Errno {
            throw SpoolError.system("ftruncate", path: path, errno)
        }
    }
}

/// Directory-level operations: create, list, lock, rename, remove, and make entries durable.
package enum DirectoryIO {
    /// Creates `path` (and missing parents) with `permissions`; an existing directory is fine.
    /// Every directory it creates is made durable in its parent (`fsync` of the parent), so a
    /// power loss cannot take away a directory whose files were already made durable.
    /// - Parameter insideLog: `path` is a directory inside a log (`consumers/`, `keys/`, ...),
    ///   which must not be a symbolic link: nothing Spool writes may land outside the log's
    ///   directory. (The log's own directory may be a link: the caller named it.)
    static func create(_ path: String, permissions: UInt16, insideLog: Bool = false) throws {
        var partial = path.hasPrefix("/") ? "" : "."
        for component in path.split(separator: "/") {
            let parent = partial.isEmpty ? "/" : partial
            partial += "/" + component
            if mkdir(partial, mode_t(permissions)) != 0 {
                let error = Errno(rawValue: errno)
                if error == .fileExists { continue }
                throw SpoolError.system("mkdir", path: partial, error)
            }
            try sync(parent)
        }
        var info = stat()
        guard (insideLog ? lstat(path, &info) : stat(path, &info)) == 0 else { throw SpoolError.system("stat", path: path, Errno(rawValue: errno)) }
        if insideLog && (info.st_mode & S_IFMT) == S_IFLNK { throw SpoolError.symbolicLink(path) }
        guard (info.st_mode & S_IFMT) == S_IFDIR else {
            throw SpoolError(.io, "is not a directory", path: path, errno: .notDirectory)
        }
    }

    /// The names in `path`, without "." and "..".
    static func list(_ path: String) throws -> [String] {
        guard let dir = opendir(path) else { throw SpoolError.system("opendir", path: path, Errno(rawValue: errno)) }
        defer { closedir(dir) }
        var names = [String]()
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    /// `fsync` on the directory, so that created, renamed and deleted entries are durable.
    static func sync(_ path: String) throws {
        if case .error(let errno) = FaultInjection.check(.sync, path: path + "/") {
            throw SpoolError.system("fsync directory", path: path, errno)
        }
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw SpoolError.system("open directory", path: path, Errno(rawValue: errno)) }
        defer { close(fd) }
        while fsync(fd) != 0 {
            let error = Errno(rawValue: errno)
            if error != .interrupted { throw SpoolError.system("fsync directory", path: path, error) }
        }
        if FaultInjection.isTracked(path) {
            var entries = [String: UInt64]()
            for name in (try? list(path)) ?? [] {
                var info = stat()
                if lstat(path + "/" + name, &info) == 0 { entries[name] = UInt64(info.st_ino) }
            }
            FaultInjection.recordDirectorySync(path: path, entries: entries)
        }
    }

    static func rename(_ from: String, to: String) throws {
        if case .error(let errno) = FaultInjection.check(.rename, path: to) {
            throw SpoolError.system("rename", path: to, errno)
        }
        guard posixRename(from, to) == 0 else { throw SpoolError.system("rename", path: to, Errno(rawValue: errno)) }
    }

    /// Removes a file; a file that is already gone is fine.
    static func remove(_ path: String) throws {
        if unlink(path) != 0 {
            let error = Errno(rawValue: errno)
            if error != .noSuchFileOrDirectory { throw SpoolError.system("unlink", path: path, error) }
        }
    }

    static func exists(_ path: String) -> Bool {
        access(path, F_OK) == 0
    }

    /// Appends `bytes` to the file at `path` in `directory` and makes them durable: the file is
    /// created with `permissions` when missing (and the directory synced then), no link is
    /// followed, and its data is synced before this returns. Callers serialise their appends.
    package static func appendDurably(_ bytes: [UInt8], to path: String, directory: String, permissions: UInt16) throws {
        let created = !exists(path)
        let file = try FileIO.open(path, created ? .createNew(permissions: permissions) : .readWrite)
        defer { file.close() }
        try file.write(bytes, at: try file.size())
        try file.syncData()
        if created { try sync(directory) }
    }

    /// Writes a small file atomically: temporary file, fsync, rename over `path`, fsync the directory.
    static func writeAtomically(_ bytes: [UInt8], to path: String, directory: String, permissions: UInt16) throws {
        let temporary = path + Format.temporarySuffix
        try remove(temporary)
        let file = try FileIO.open(temporary, .createNew(permissions: permissions))
        do {
            try file.write(bytes, at: 0)
            try file.syncData()
            file.close()
        } catch {
            file.close()
            try? remove(temporary)
            throw error
        }
        try rename(temporary, to: path)
        try sync(directory)
    }
}

/// `rename(2)`, under a name that does not collide with `DirectoryIO.rename`.
private func posixRename(_ from: String, _ to: String) -> Int32 {
    rename(from, to)
}
