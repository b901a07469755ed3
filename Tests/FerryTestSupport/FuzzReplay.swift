import Foundation

/// The seed and size of a generated run: `FERRY_FUZZ_SEED` replays one (each
/// suite prints its seed), `FERRY_FUZZ_MESSAGES` sets how many messages it sends.
public enum FuzzReplay {
    public static var seed: UInt64 {
        ProcessInfo.processInfo.environment["FERRY_FUZZ_SEED"].flatMap(UInt64.init) ?? UInt64.random(in: 1...UInt64(Int64.max))
    }

    public static func messages(default value: Int) -> Int {
        ProcessInfo.processInfo.environment["FERRY_FUZZ_MESSAGES"].flatMap(Int.init) ?? value
    }
}
