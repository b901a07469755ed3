import FerryCore
import Synchronization
import FerryConcurrency

/// The notifications being handled now, by their store's id. Ingest handles
/// many at once, and a removal waits out the settle window before it is
/// published: a store's repeat of it (RGW re-sends) would pass the "seen
/// before" check in that window and be announced twice. A repeat waits for
/// the first to finish instead, and then finds it seen.
final class ClaimedNotifications: Sendable {
    private let claims = Mutex<[String: OnceValue<Void>]>([:])

    /// Returns once `id` is this caller's; `release` hands it on.
    func claim(_ id: String) async {
        while true {
            let holder: OnceValue<Void>? = claims.withLock { claims in
                if let holder = claims[id] { return holder }
                claims[id] = OnceValue()
                return nil
            }
            guard let holder else { return }
            await holder.value
        }
    }

    func release(_ id: String) {
        claims.withLock { $0.removeValue(forKey: id) }?.deliver(())
    }

    var count: Int { claims.withLock { $0.count } }
}
