#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Spool

/// What the collector checks of the files another local user could read or change: the token
/// file (``CollectorConfiguration/authTokenFile``) and the log directory
/// (``CollectorConfiguration/logDirectory``), as OpenSSH checks a private key.
///
/// Each check returns the warnings to log, or throws what no operator would want (and, with
/// ``CollectorConfiguration/strictPermissions``, what it would warn about). Blocking (one
/// `stat`): call it off the cooperative pool. Messages name the path, the mode and the fix.
enum FileSafety {
    /// The token file: readable or writable by its group or others (any of mode 0077) warns,
    /// or with `strict` throws `.invalidConfiguration`. A file that cannot be looked at is
    /// left to the read that follows.
    static func checkTokenFile(_ path: String, strict: Bool) throws -> [String] {
        guard let info = status(of: path), info.st_mode & 0o077 != 0 else { return [] }
        let problem = "the token file is readable or writable by its group or others (mode \(octal(info.st_mode))): any local user could read or add a token; run chmod 600 \(path)"
        guard !strict else { throw SpoolError(.invalidConfiguration, problem + " (--strict-permissions)", path: path) }
        return [problem]
    }

    /// The log directory, when it exists: world-writable (any sticky bit aside) throws
    /// `.invalidConfiguration`, for any local user could add, remove or replace its files;
    /// group-writable or owned by another user warns, or with `strict` throws.
    static func checkLogDirectory(_ path: String, strict: Bool) throws -> [String] {
        guard let info = status(of: path) else { return [] }
        let mode = octal(info.st_mode)
        if info.st_mode & 0o002 != 0 {
            throw SpoolError(.invalidConfiguration, "the log directory is world-writable (mode \(mode)): any local user could change or remove the records it holds; run chmod o-w \(path) (Spool creates it 0700)", path: path)
        }
        var problems: [String] = []
        if info.st_mode & 0o020 != 0 {
            problems.append("the log directory is group-writable (mode \(mode)): the group's users could change or remove the records it holds; run chmod g-w \(path)")
        }
        if info.st_uid != geteuid() {
            problems.append("the log directory is owned by another user (uid \(info.st_uid), mode \(mode)), who could change or remove the records it holds; give it to the collector's user (chown)")
        }
        if strict, let first = problems.first {
            throw SpoolError(.invalidConfiguration, first + " (--strict-permissions)", path: path)
        }
        return problems
    }

    /// `stat` of `path`, following a link; nil when it cannot be looked at.
    private static func status(of path: String) -> stat? {
        var info = stat()
        return stat(path, &info) == 0 ? info : nil
    }

    /// The permission bits of `mode` in octal with a leading 0: `0644`, `01777`.
    private static func octal(_ mode: mode_t) -> String {
        "0" + String(mode & 0o7777, radix: 8)
    }
}
