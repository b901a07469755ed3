import FerryCore
import Synchronization
import FerryConcurrency

/// A running transfer's hold on the engine's limit of transfers at once.
///
/// A download whose bytes are all in the file still waits for its checks
/// (the MD5 shares vector lanes with other downloads' and waits for them to
/// fill, see `MD5Lanes`), then flushes and renames. It moves no bytes
/// meanwhile, so it steps aside: the next transfer takes its slot, and it
/// holds one of as many finishing places instead. When every place is
/// taken it keeps its slot, so at most twice the limit of transfers are
/// unfinished at once, and never more than the limit move bytes.
final class TransferSlot: Sendable {
    private enum Hold: UInt8 { case slot, place, nothing }

    private let slots: AsyncSemaphore
    private let places: FinishingPlaces
    private let hold = Atomic<UInt8>(Hold.slot.rawValue)

    /// For a transfer that has just acquired one of `slots`.
    init(slots: AsyncSemaphore, places: FinishingPlaces) {
        self.slots = slots
        self.places = places
    }

    /// Gives the slot to the next transfer if a finishing place is free.
    func stepAside() {
        guard hold.load(ordering: .acquiring) == Hold.slot.rawValue, places.tryTake() else { return }
        if hold.compareExchange(expected: Hold.slot.rawValue, desired: Hold.place.rawValue, ordering: .acquiringAndReleasing).exchanged {
            slots.release()
        } else {
            places.giveBack()  // released meanwhile (a transfer abandoned after its timeout)
        }
    }

    /// Takes a slot again before moving bytes (a download starting over
    /// after its checks failed): waits for one like a new transfer, unless
    /// the transfer is cancelled meanwhile.
    func takeBack(_ control: TransferControl) async throws(FerryError) {
        guard hold.load(ordering: .acquiring) == Hold.place.rawValue else { return }
        guard await slots.acquireUnlessCancelled() else {
            throw control.cancellationReason ?? FerryError(.cancelled, "transfer cancelled while waiting for a slot")
        }
        if hold.compareExchange(expected: Hold.place.rawValue, desired: Hold.slot.rawValue, ordering: .acquiringAndReleasing).exchanged {
            places.giveBack()
        } else {
            slots.release()
        }
    }

    /// Lets go of whatever it holds (the transfer ended); later calls do nothing.
    func release() {
        switch Hold(rawValue: hold.exchange(Hold.nothing.rawValue, ordering: .acquiringAndReleasing)) {
        case .slot: slots.release()
        case .place: places.giveBack()
        case .nothing, nil: break
        }
    }
}

/// The engine's places for transfers that have stepped aside (`TransferSlot`).
final class FinishingPlaces: Sendable {
    let limit: Int
    private let taken = Atomic<Int>(0)

    init(limit: Int) { self.limit = limit }

    var inUse: Int { taken.load(ordering: .relaxed) }

    /// Takes a place if one is free; never waits.
    func tryTake() -> Bool {
        var current = taken.load(ordering: .relaxed)
        while current < limit {
            let (exchanged, original) = taken.compareExchange(expected: current, desired: current + 1, ordering: .acquiringAndReleasing)
            if exchanged { return true }
            current = original
        }
        return false
    }

    func giveBack() { taken.subtract(1, ordering: .acquiringAndReleasing) }
}
