import FerryCore
import Testing

struct ShutdownStepsTests {
    @Test func stepsAreTimedFromTheSignalOneAfterAnother() async throws {
        let steps = ShutdownSteps()
        #expect(!steps.begun)
        steps.ended("before the signal")  // not a step of the stop
        #expect(steps.elapsedSeconds == 0)
        steps.begin()
        try await Task.sleep(for: .milliseconds(300))
        steps.ended("first")
        #expect(steps.begun)
        steps.begin()  // a second cancellation does not restart the clock
        steps.ended("second")
        let summary = steps.summary
        #expect(!summary.contains("before the signal"))
        #expect(summary.contains("first 0.3 s") || summary.contains("first 0.4 s") || summary.contains("first 0.5 s"), "\(summary)")
        #expect(summary.contains(", second 0.0 s"), "\(summary)")
        #expect(steps.elapsedSeconds >= 0.3)
    }
}
