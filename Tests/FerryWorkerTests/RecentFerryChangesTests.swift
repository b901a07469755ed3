import Foundation
import Testing
@testable import FerryWorker

/// The ingest role's memory of Ferry's own writes follows the writes of the
/// last ten minutes, at a cost per write that does not grow with them.
@Suite struct RecentFerryChangesTests {
    /// 200,000 keys written within the window: the map is swept when its
    /// size doubles (5 times), not on every write past 10,000 keys.
    @Test func sweepsAreFewWhenTheWindowHoldsManyKeys() {
        let recent = RecentFerryChanges()
        let now = Date()
        for index in 0..<200_000 {
            recent.note(bucket: "b", key: "k\(index)", removal: false, eTag: "e", now: now.addingTimeInterval(Double(index) / 1000))
        }
        let size = recent.size
        #expect(size.keys == 200_000)
        #expect(size.sweeps <= 6, "\(size.sweeps) sweeps")
        #expect(recent.created(bucket: "b", key: "k199999", eTag: "\"e\""))
    }

    /// One key written every second for almost three hours keeps the changes of
    /// the last ten minutes; keys with none left go at the next sweep.
    @Test func changesOutsideTheWindowGo() {
        let recent = RecentFerryChanges()
        let start = Date()
        for second in 0..<10_000 {
            recent.note(bucket: "b", key: "hot", removal: second % 2 == 0, eTag: "e\(second)", now: start.addingTimeInterval(Double(second)))
        }
        #expect(recent.size.changes <= 600, "\(recent.size.changes) changes of one key")
        #expect(!recent.created(bucket: "b", key: "hot", eTag: "e1"))
        #expect(recent.created(bucket: "b", key: "hot", eTag: "e9999"))
        // 20,000 keys now, 20,000 more eleven minutes on: the first ones are swept.
        let later = start.addingTimeInterval(20_000)
        for index in 0..<20_000 { recent.note(bucket: "b", key: "old\(index)", removal: false, eTag: nil, now: later) }
        for index in 0..<20_000 { recent.note(bucket: "b", key: "new\(index)", removal: false, eTag: nil, now: later.addingTimeInterval(660)) }
        #expect(recent.size.keys < 30_000, "\(recent.size.keys) keys held")
        #expect(!recent.created(bucket: "b", key: "old0", eTag: nil))
        #expect(recent.created(bucket: "b", key: "new0", eTag: nil))
    }
}
