import CRdKafka
import FerryCore
import Foundation
import Logging
import Synchronization
import FerryConcurrency

/// Owns one `rd_kafka_t`. librdkafka's handle is thread-safe, hence `@unchecked Sendable`.
final class KafkaHandle: @unchecked Sendable {
    let rk: OpaquePointer
    let log: KafkaLogSink

    init(type: rd_kafka_type_t, conf: OpaquePointer, logger: Logger) throws(KafkaError) {
        var errorText = [CChar](repeating: 0, count: 512)
        rd_kafka_conf_set_log_cb(conf, kafkaLogCallback)
        let sink = KafkaLogSink(logger: logger)
        // librdkafka takes ownership of conf on success only.
        guard let rk = KafkaLogSink.creating(sink, { rd_kafka_new(type, conf, &errorText, errorText.count) }) else {
            rd_kafka_conf_destroy(conf)
            throw KafkaError(name: "ClientCreation",
                             message: String(cBuffer: errorText))
        }
        self.rk = rk
        log = KafkaLogSink.register(sink, for: rk)
    }

    /// Set when destroying the handle would hit a librdkafka bug; the handle
    /// is then left to the process's exit (see `KafkaConsumer.close`).
    let leakOnDeinit = Atomic<Bool>(false)

    deinit {
        if !leakOnDeinit.load(ordering: .acquiring) {
            rd_kafka_destroy(rk)
            KafkaLogSink.unregister(rk)
        }
    }
}

/// Where librdkafka's log lines go: the handle's swift-log `Logger`, so that
/// `--log-level` and `--log-format json` govern them like Ferry's own lines
/// (librdkafka's default printed `%3|…` lines on stderr, breaking a JSON log
/// stream). Keeps the last error-level line, which a command names when it
/// gives up (a refused connection says more than "message timed out").
final class KafkaLogSink: Sendable {
    let logger: Logger
    private let lastErrorLine = Mutex<String?>(nil)

    init(logger: Logger) { self.logger = logger }

    /// The last line librdkafka logged at error level or worse, if any.
    var lastError: String? { lastErrorLine.withLock { $0 } }

    /// An error for want of a broker names the brokers and what librdkafka
    /// last logged as an error (a refused connection, a failed TLS handshake,
    /// a name that does not resolve): "Message timed out" alone does not say why.
    func explain(_ error: KafkaError, brokers: String?) -> KafkaError {
        guard ["_MSG_TIMED_OUT", "_TIMED_OUT", "_TRANSPORT", "_ALL_BROKERS_DOWN", "_RESOLVE"].contains(error.name) else { return error }
        var notes: [String] = []
        if let brokers, !brokers.isEmpty { notes.append("brokers \(brokers)") }
        if let last = lastError { notes.append("librdkafka's last error: \(last)") }
        guard !notes.isEmpty else { return error }
        var explained = error
        explained.message += " (\(notes.joined(separator: "; ")))"
        return explained
    }

    func write(level: Int32, facility: String, client: String, line: String) {
        let mapped: Logger.Level
        switch level {
        case ...2: mapped = .critical
        case 3: mapped = .error
        case 4: mapped = .warning
        case 5: mapped = .notice
        case 6: mapped = .info
        default: mapped = .debug
        }
        if level <= 3 { lastErrorLine.withLock { $0 = line } }
        logger.log(level: mapped, "librdkafka: \(line)", metadata: ["kafka_facility": "\(facility)", "kafka_client": "\(client)"])
    }

    // The sinks of live handles, by handle address: librdkafka calls back from its own threads.
    private static let sinks = Mutex<[UInt: KafkaLogSink]>([:])
    /// For lines no handle's sink can take (logged by a thread of a handle being created).
    private static let fallback = KafkaLogSink(logger: Logger(label: "ferry.kafka"))
    /// The sink of the handle `rd_kafka_new` is creating on this thread: it logs
    /// its configuration warnings there, before the handle is registered.
    private static let creatingKey: pthread_key_t = {
        var key = pthread_key_t()
        precondition(pthread_key_create(&key, nil) == 0, "no thread-specific key left")
        return key
    }()

    /// Runs `body` (which creates a handle) with `sink` taking the lines logged on this thread meanwhile.
    static func creating<T>(_ sink: KafkaLogSink, _ body: () -> T) -> T {
        let retained = Unmanaged.passRetained(sink)
        pthread_setspecific(creatingKey, retained.toOpaque())
        defer {
            pthread_setspecific(creatingKey, nil)
            retained.release()
        }
        return body()
    }

    fileprivate static func register(_ sink: KafkaLogSink, for rk: OpaquePointer) -> KafkaLogSink {
        sinks.withLock { $0[UInt(bitPattern: rk)] = sink }
        return sink
    }

    fileprivate static func unregister(_ rk: OpaquePointer) {
        _ = sinks.withLock { $0.removeValue(forKey: UInt(bitPattern: rk)) }
    }

    static func sink(for rk: OpaquePointer?) -> KafkaLogSink {
        if let rk, let sink = sinks.withLock({ $0[UInt(bitPattern: rk)] }) { return sink }
        if let creating = pthread_getspecific(creatingKey) { return Unmanaged<KafkaLogSink>.fromOpaque(creating).takeUnretainedValue() }
        return fallback
    }
}

private let kafkaLogCallback: @convention(c) (OpaquePointer?, Int32, UnsafePointer<CChar>?, UnsafePointer<CChar>?) -> Void = { rk, level, facility, line in
    let client = rk.map { String(cString: rd_kafka_name($0)) } ?? ""
    KafkaLogSink.sink(for: rk).write(level: level, facility: facility.map { String(cString: $0) } ?? "",
                                     client: client, line: line.map { String(cString: $0) } ?? "")
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
        ProcessThreads.start(name) { [flag, done] in
            while flag.running.load(ordering: .acquiring) { body() }
            done.signal()
        }
    }

    /// Stops the loop and waits for the current poll to return.
    func stop() {
        if flag.running.exchange(false, ordering: .acquiringAndReleasing) { done.wait() }
    }
}

/// The librdkafka version string, e.g. `2.0.2`.
public let librdkafkaVersion = String(cString: rd_kafka_version_str())
