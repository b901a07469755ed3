import FerryCore
@testable import FerryEngine
import FerryTestSupport
import Synchronization
import Testing
import FerryConcurrency

/// `TransferSlot`: a download that steps aside gives its slot to the next
/// transfer and holds a finishing place instead, only while one is free;
/// taking a slot back waits like a new transfer; whatever is held is given
/// back exactly once, whichever of release and the other calls comes first.
@Suite struct TransferSlotTests {
    @Test func steppingAsideHandsTheSlotToTheNextTransfer() async throws {
        let slots = AsyncSemaphore(limit: 1), places = FinishingPlaces(limit: 1)
        await slots.acquire()
        let first = TransferSlot(slots: slots, places: places)
        let next = Task { await slots.acquire(); return TransferSlot(slots: slots, places: places) }
        first.stepAside()
        let second = await next.value
        #expect(slots.inUse == 1 && places.inUse == 1)

        // No place left: the second keeps its slot while it finishes.
        second.stepAside()
        #expect(slots.inUse == 1 && places.inUse == 1)

        // Taking the slot back waits until the second lets go of it.
        let control = TransferControl()
        let back = Task { () async throws -> Void in try await first.takeBack(control) }
        try await Task.sleep(for: .milliseconds(50))
        #expect(places.inUse == 1, "took a slot that was held")
        second.release()
        try await back.value
        #expect(slots.inUse == 1 && places.inUse == 0)
        first.release()
        first.release()
        #expect(slots.inUse == 0 && places.inUse == 0)
    }

    @Test func aCancelledTransferStopsWaitingForItsSlot() async throws {
        let slots = AsyncSemaphore(limit: 1), places = FinishingPlaces(limit: 1)
        await slots.acquire()
        let aside = TransferSlot(slots: slots, places: places)
        aside.stepAside()
        await slots.acquire()  // another transfer has the slot
        let control = TransferControl()
        let back = Task { () async throws -> Void in try await aside.takeBack(control) }
        control.cancel(FerryError(.cancelled, "cancelled by the test"))
        back.cancel()
        await #expect(throws: FerryError.self) { try await back.value }
        aside.release()
        slots.release()
        #expect(slots.inUse == 0 && places.inUse == 0)
    }

    /// Seeded: 64 transfers on 4 slots and 4 places step aside, take their
    /// slot back and end in random orders, some released from another task
    /// at the same moment (a transfer abandoned after its timeout). The limits
    /// hold throughout, and everything is given back at the end.
    @Test(arguments: [0x5107, 0xA51DE])
    func limitsHoldUnderRandomOrders(seed: UInt64) async throws {
        let slots = AsyncSemaphore(limit: 4), places = FinishingPlaces(limit: 4)
        let worst = Worst(slots: slots, places: places)
        var rng = SeededGenerator(seed: seed)
        let plans = (0..<64).map { _ in (0..<Int.random(in: 1...6, using: &rng)).map { _ in Int.random(in: 0..<3, using: &rng) } }
        let racedRelease = (0..<64).map { _ in Bool.random(using: &rng) }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (plan, raced) in zip(plans, racedRelease) {
                group.addTask {
                    await slots.acquire()
                    let slot = TransferSlot(slots: slots, places: places)
                    let control = TransferControl()
                    worst.observe()
                    for step in plan {
                        switch step {
                        case 0: slot.stepAside()
                        case 1: try await slot.takeBack(control)
                        default: await Task.yield()
                        }
                        worst.observe()
                    }
                    if raced {
                        async let other: Void = slot.release()
                        slot.stepAside()
                        await other
                    }
                    slot.release()
                    worst.observe()
                }
            }
            try await group.waitForAll()
        }
        #expect(worst.most.withLock { $0.slots } <= 4)
        #expect(worst.most.withLock { $0.places } <= 4)
        #expect(slots.inUse == 0 && places.inUse == 0)
    }

    /// The most slots and places seen in use.
    final class Worst: Sendable {
        let slots: AsyncSemaphore
        let places: FinishingPlaces
        let most = Mutex((slots: 0, places: 0))
        init(slots: AsyncSemaphore, places: FinishingPlaces) {
            self.slots = slots
            self.places = places
        }
        func observe() {
            let (s, p) = (slots.inUse, places.inUse)
            most.withLock { $0 = (max($0.slots, s), max($0.places, p)) }
        }
    }
}
