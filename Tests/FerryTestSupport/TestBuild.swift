/// What this test build was compiled with.
public enum TestBuild {
    /// Whether the `TestHooks` trait is on (as `scripts/test.sh` builds):
    /// the `ferry` binary then honours the `FERRY_TEST_*` fault hooks that
    /// the crash-loop tests set. Without it those tests are skipped, not failed.
    #if FERRY_TEST_HOOKS
    public static let hasHooks = true
    #else
    public static let hasHooks = false
    #endif
}
