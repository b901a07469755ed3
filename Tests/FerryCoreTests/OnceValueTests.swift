import FerryCore
import Testing
import FerryConcurrency

@Suite struct OnceValueTests {
    /// Waiters from before and after the delivery get the first value; later deliveries are refused.
    @Test func firstDeliveryReachesEveryWaiter() async {
        let once = OnceValue<Int>()
        let early = (0..<20).map { _ in Task { await once.value } }
        try? await Task.sleep(for: .milliseconds(50))
        let results = await withTaskGroup(of: Bool.self) { group in
            for n in 1...8 { group.addTask { once.deliver(n) } }
            return await group.reduce(into: [Bool]()) { $0.append($1) }
        }
        #expect(results.filter { $0 }.count == 1)
        let first = await once.value
        for task in early { #expect(await task.value == first) }
        #expect(once.deliver(99) == false)
        #expect(await once.value == first)
    }
}
