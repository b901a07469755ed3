import CRdKafka
import Foundation
import Logging
import Synchronization

/// Owns one `rd_kafka_t`. librdkafka's handle is thread-safe, hence `@unchecked Sendable`.
final class KafkaHandle: @unchecked Sendable {
    let rk: OpaquePointer

    init(type: rd_kafka_type_t, conf: OpaquePointer, logger: Logger) throws(KafkaError) {
        var errorText = [CChar](repeating: 0, count: 512)
        // librdkafka takes ownership of conf on success only.
        guard let rk = rd_kafka_new(type, conf, &errorText, errorText.count) else {
            rd_kafka_conf_destroy(conf)
            throw KafkaError(name: "ClientCreation",
                             message: String(decoding: errorText.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        self.rk = rk
    }

    /// Set when destroying the handle would hit a librdkafka bug; the handle
    /// is then left to the process's exit (see `KafkaConsumer.close`).
    let leakOnDeinit = Atomic<Bool>(false)

    deinit {
        if !leakOnDeinit.load(ordering: .acquiring) { rd_kafka_destroy(rk) }
    }
}

/// A dedicated thread calling a blocking librdkafka poll until stopped, so the
/// poll never occupies Swift's cooperative pool.
final class PollThread: Sendable {
    private final class Flag: Sendable {
        let running = Atomic<Bool>(true)
    }
    private let flag = Flag()
    private let done = DispatchSemaphore(value: 0)

    init(name: String, body: @escaping @Sendable () -> Void) {
        let thread = Thread { [flag, done] in
            while flag.running.load(ordering: .acquiring) { body() }
            done.signal()
        }
        thread.name = name
        thread.start()
    }

    /// Stops the loop and waits for the current poll to return.
    func stop() {
        if flag.running.exchange(false, ordering: .acquiringAndReleasing) { done.wait() }
    }
}

/// The librdkafka version string, e.g. `2.0.2`.
public let librdkafkaVersion = String(cString: rd_kafka_version_str())
