import FerryCore
import Testing
import FerryConcurrency

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
        // Lower bounds only: a loaded machine may stretch the sleep, never shorten it.
        #expect(seconds(of: "first", in: summary).map { $0 >= 0.3 } == true, "\(summary)")
        #expect(seconds(of: "second", in: summary) != nil, "\(summary)")
        if let first = summary.range(of: "first "), let second = summary.range(of: ", second ") {
            #expect(first.lowerBound < second.lowerBound, "\(summary)")
        }
        #expect(steps.elapsedSeconds >= 0.3)
    }

    /// The seconds a summary gives `step` ("name 1.2 s").
    private func seconds(of step: String, in summary: String) -> Double? {
        guard let range = summary.range(of: "\(step) ") else { return nil }
        return Double(summary[range.upperBound...].prefix { $0.isNumber || $0 == "." })
    }
}
