import DequeModule

/// The messages of a partition its reader holds (`KafkaConsumer.hold`), set
/// aside in offset order until it is released. Up to `limit` of them: past
/// that the rest is dropped and fetched again from the first one dropped, so a
/// hold costs at most `limit` messages of memory and no refetch in the usual
/// case (what librdkafka had fetched before the pause).
struct HeldPartition: Sendable {
    static let limit = 512

    private(set) var messages = Deque<KafkaMessage>()
    /// The first offset dropped: where the release's seek rewinds to.
    private(set) var refetchFrom: Int64?

    init(_ first: KafkaMessage) { setAside(first) }

    /// Keeps every message before `refetchFrom`, in order; the rest comes again after the seek.
    mutating func setAside(_ message: KafkaMessage) {
        if let from = refetchFrom, message.offset >= from { return }
        if let last = messages.last, message.offset <= last.offset {
            // A message given back comes before those that arrived after it;
            // one set aside already is not kept twice.
            let at = messages.firstIndex { $0.offset >= message.offset }!
            guard messages[at].offset != message.offset else { return }
            messages.insert(message, at: at)
        } else {
            messages.append(message)
        }
        if messages.count > Self.limit, let dropped = messages.popLast() {
            refetchFrom = dropped.offset
        }
    }
}
