import FerryCore
import Foundation
import Metrics
import Synchronization

/// The transfers this worker runs now, for the admin API and the in-flight gauge.
public final class InFlightTransfers: Sendable {
    public struct Entry: Sendable, Codable, Hashable {
        public var id: String
        public var op: String
        public var bucket: String
        public var key: String
        public var partition: Int32
        public var offset: Int64
        public var startedAt: String
        public var state: TransferStatus.State
        public var bytesTransferred: Int64
        public var totalBytes: Int64?
    }
    private let entries = Mutex<[String: Entry]>([:])

    public init() {}

    func add(_ entry: Entry) {
        let count = entries.withLock { $0[entry.id] = entry; return $0.count }
        Gauge(label: "ferry_transfers_in_flight").record(count)
    }

    func update(_ id: String, _ change: (inout Entry) -> Void) {
        entries.withLock { if var e = $0[id] { change(&e); $0[id] = e } }
    }

    func remove(_ id: String) {
        let count = entries.withLock { $0[id] = nil; return $0.count }
        Gauge(label: "ferry_transfers_in_flight").record(count)
    }

    public var all: [Entry] { entries.withLock { $0.values.sorted { ($0.startedAt, $0.id) < ($1.startedAt, $1.id) } } }
    public func entry(_ id: String) -> Entry? { entries.withLock { $0[id] } }
}
