@testable import FerryWorker
import Synchronization
import Testing

/// A notification's repeats are handled one after another, never beside it;
/// other notifications are not held up.
@Suite struct ClaimedNotificationsTests {
    final class Holding: Sendable {
        let state = Mutex((now: 0, most: 0, done: 0))
    }

    @Test func repeatsWaitForTheFirstAndOthersDoNot() async {
        let claims = ClaimedNotifications()
        let holding = Holding()
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<40 {
                group.addTask {
                    await claims.claim("rgw-event-1")
                    holding.state.withLock { $0.now += 1; $0.most = max($0.most, $0.now) }
                    try? await Task.sleep(for: .milliseconds(2))
                    holding.state.withLock { $0.now -= 1; $0.done += 1 }
                    claims.release("rgw-event-1")
                }
            }
            // Another id is claimed at once while the first is busy.
            group.addTask {
                await claims.claim("rgw-event-2")
                claims.release("rgw-event-2")
            }
        }
        let result = holding.state.withLock { $0 }
        #expect(result.most == 1)
        #expect(result.done == 40)
        #expect(claims.count == 0)
    }
}
