import FerryCore
import Foundation
import Logging
import Synchronization

/// The handler's client for enqueueing transfers, with Lambda's recursive-loop
/// detection: a write that would trigger the calling handler again (its own
/// event types and prefix/suffix, or for an `objects` stream trigger, its
/// filters) is refused with `RecursiveInvocationError` before it is sent.
public struct TriggerTransfers: Sendable {
    public typealias Send = @Sendable (TransferRequest) async throws -> Void
    let send: Send
    let resolver: any PrefixResolver
    /// (event name the write causes, S3 key) → whether it reaches the calling handler again.
    let triggersCaller: @Sendable (String, String, String) -> Bool
    let handlerName: String

    public init(handlerName: String, resolver: any PrefixResolver,
                triggersCaller: @escaping @Sendable (_ eventName: String, _ bucket: String, _ key: String) -> Bool,
                send: @escaping Send) {
        self.handlerName = handlerName; self.resolver = resolver; self.triggersCaller = triggersCaller; self.send = send
    }

    /// Enqueues `request` on `<prefix>.requests`; it runs like any producer's request.
    public func enqueue(_ request: TransferRequest) async throws {
        let eventName: String
        switch request.op {
        case .upload: eventName = "ObjectCreated:Put"
        case .copy: eventName = "ObjectCreated:Copy"
        case .delete: eventName = "ObjectRemoved:Delete"
        case .download: eventName = ""
        }
        if !eventName.isEmpty {
            let key = try resolver.objectKey(for: request)
            if triggersCaller(eventName, request.bucket, key) {
                throw RecursiveInvocationError(handler: handlerName, bucket: request.bucket, key: key, eventName: eventName)
            }
        }
        try await send(request)
    }

    /// Writes `bytes` as the object `key` (before the access-level prefix, as
    /// in a request): an upload request with the bytes in a `data:` URI, so
    /// the object is announced like any other. `id` makes it idempotent: give
    /// the same id for the same event (e.g. derived from its eventID), and a
    /// redelivered event writes once.
    public func upload(_ bytes: [UInt8], id: String, bucket: String, key: String, contentType: String = "application/octet-stream",
                       accessLevel: AccessLevel = .guest) async throws {
        try await enqueue(TransferRequest(id: id, op: .upload, bucket: bucket, key: key, accessLevel: accessLevel,
                                          source: "data:\(contentType);base64,\(Data(bytes).base64EncodedString())",
                                          contentType: contentType))
    }
}

/// A handler tried to write where its own trigger fires: the invocation is
/// stopped, not retried, and dead-lettered with `RecursiveInvocationDetected`.
public struct RecursiveInvocationError: Error, CustomStringConvertible, Sendable {
    public var handler: String
    public var bucket: String
    public var key: String
    public var eventName: String
    public var description: String {
        "recursive invocation stopped: handler '\(handler)' tried to write s3://\(bucket)/\(key), whose \(eventName) event "
            + "would trigger '\(handler)' again; write outside the prefix (or suffix) that triggers it"
    }
}

/// Where a handler run outside the fleet (`ferry triggers test`) sends transfers: nowhere, it lists them.
public final class RecordedTransfers: Sendable {
    private let store = Mutex<[TransferRequest]>([])
    public init() {}
    public var requests: [TransferRequest] { store.withLock { $0 } }
    public func record(_ request: TransferRequest) { store.withLock { $0.append(request) } }
}

extension TriggerContext {
    /// A context for running a handler outside the fleet (unit tests, `ferry triggers test`):
    /// transfers it enqueues are recorded in `recorder`, not sent; `triggersCaller` is the loop guard's check.
    public static func local(handlerName: String, environment: TriggerEnvironment, recorder: RecordedTransfers = RecordedTransfers(),
                             timeout: Double = 30, logger: Logger = Logger(label: "ferry.triggers.local"),
                             messages: (any MessageSender)? = nil,
                             triggersCaller: @escaping @Sendable (String, String, String) -> Bool = { _, _, _ in false }) -> TriggerContext {
        let transfers = TriggerTransfers(handlerName: handlerName, resolver: environment.prefixResolver,
                                         triggersCaller: triggersCaller) { recorder.record($0) }
        return TriggerContext(requestId: UUID().uuidString, handlerName: handlerName, attempt: 1,
                              deadline: .now + .seconds(timeout), logger: logger, environment: environment, transfers: transfers,
                              messages: messages)
    }
}
