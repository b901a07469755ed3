import CRdKafka
import DequeModule
import FerryCore
import Foundation
import Logging
import Synchronization
import FerryConcurrency

/// The first answer of several racers (a blocking call and its timer); later ones are dropped.
final class OneAnswer<Value: Sendable>: Sendable {
    private struct State {
        var value: Value?
        var receiver: (@Sendable (Value) -> Void)?
        var delivered = false
    }
    private let state = Mutex(State())

    func onAnswer(_ receiver: @escaping @Sendable (Value) -> Void) {
        let ready: Value? = state.withLock { s in
            if let v = s.value, !s.delivered { s.delivered = true; return v }
            s.receiver = receiver
            return nil
        }
        if let ready { receiver(ready) }
    }

    func give(_ value: Value) {
        let deliver: (@Sendable (Value) -> Void)? = state.withLock { s in
            guard s.value == nil else { return nil }
            s.value = value
            guard let r = s.receiver, !s.delivered else { return nil }
            s.delivered = true
            return r
        }
        deliver?(value)
    }
}
