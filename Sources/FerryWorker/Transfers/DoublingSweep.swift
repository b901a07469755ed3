/// When a map that drops expired entries should sweep them: once its count
/// has doubled since the last sweep (and reached `floor`). A sweep's cost is
/// then spread over the entries added since, a constant per entry however many
/// are still live; a sweep on every insert past a fixed size costs the whole
/// map each time once that many are live.
struct DoublingSweep: Sendable {
    let floor: Int
    private(set) var next: Int

    init(floor: Int) {
        self.floor = floor
        next = floor
    }

    func isDue(_ count: Int) -> Bool { count >= next }

    /// After a sweep that left `count` entries.
    mutating func swept(leaving count: Int) { next = max(floor, 2 * count) }
}
