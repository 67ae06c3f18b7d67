import Foundation
import SpoolFuzzInput

// A fuzz target for Spool's readers (the inputs and what is done with them: `SpoolFuzzInput`).
//
// With libFuzzer (README, "Crash testing"): built with `-sanitize=fuzzer,address` and
// `-D SPOOL_LIBFUZZER`, libFuzzer calls `LLVMFuzzerTestOneInput`. Without it (a plain
// `swift build`), `SpoolFuzz FILE|DIR…` replays inputs, e.g. the regression corpus in
// Tests/SpoolTests/FuzzCorpus, and prints how each ended.

/// The scratch directory of this process.
let scratch = NSTemporaryDirectory() + "spool-fuzz-\(getpid())"

@_cdecl("LLVMFuzzerTestOneInput")
public func spoolFuzzTestOneInput(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    _ = runFuzzInput(Array(UnsafeBufferPointer(start: data, count: size)), directory: scratch)
    return 0
}

#if SPOOL_LIBFUZZER
/// libFuzzer's entry point, called from this target's `main` (SwiftPM links executables
/// with their module's own `main`, so libFuzzer's is not used).
@_silgen_name("LLVMFuzzerRunDriver")
func LLVMFuzzerRunDriver(
    _ argc: UnsafeMutablePointer<CInt>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>>,
    _ callback: @convention(c) (UnsafePointer<UInt8>, Int) -> CInt
) -> CInt
#endif

@main
enum SpoolFuzzMain {
    static func main() {
        #if SPOOL_LIBFUZZER
        var argc = CommandLine.argc
        var argv = CommandLine.unsafeArgv
        exit(LLVMFuzzerRunDriver(&argc, &argv) { data, size in spoolFuzzTestOneInput(data, size) })
        #else
        replay(CommandLine.arguments.dropFirst())
        #endif
    }

    /// Replays every file given, and every file in every directory given.
    static func replay(_ arguments: ArraySlice<String>) {
        var files = [String]()
        for argument in arguments {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: argument, isDirectory: &isDirectory) else { continue }
            if isDirectory.boolValue {
                let names = (try? FileManager.default.contentsOfDirectory(atPath: argument)) ?? []
                files += names.sorted().map { argument + "/" + $0 }
            } else {
                files.append(argument)
            }
        }
        if files.isEmpty {
            print("usage: SpoolFuzz FILE|DIR…  (replays fuzz inputs through Spool's readers)")
            return
        }
        for file in files {
            let input = Array(FileManager.default.contents(atPath: file) ?? Data())
            print("\((file as NSString).lastPathComponent): \(runFuzzInput(input, directory: scratch))")
        }
        try? FileManager.default.removeItem(atPath: scratch)
    }
}
