import FerryCore
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

/// The worker's small HTTP server (metrics, health, admin API) on swift-nio.
/// Each connection carries one request; the answer closes it. No client can
/// hold the server: a connection must deliver its whole request within
/// `Limits.requestTimeout` of being accepted (a silent or trickling client is
/// cut off), and past `Limits.maxConnections` open at once a new connection is
/// closed as soon as it is accepted, so the worker's file descriptors stay for
/// its transfers.
public final class AdminServer: Sendable {
    public struct Limits: Sendable {
        public var maxConnections = 128
        public var requestTimeout: TimeAmount = .seconds(30)
        public init() {}
    }

    private let channel: any Channel
    /// The address actually bound (port 0 picks a free one).
    public let port: Int

    /// Binds `address` (`HOST:PORT`).
    public static func start(address: String, router: AdminRouter, limits: Limits = Limits(),
                             logger: Logger) async throws -> AdminServer {
        let listen = try ListenAddress(parsing: address)
        let port = listen.port
        let gate = ConnectionGate(limit: limits.maxConnections, logger: logger)
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.backlog, value: 64)
            // Address reuse lets a restart take its fixed port past TIME_WAIT; a port
            // left to the kernel (0) goes without it, so it is never one that another
            // socket still holds (such as a stopped embedded broker's: BrokerDownUpTests).
            .serverChannelOption(.socketOption(.so_reuseaddr), value: port == 0 ? 0 : 1)
            // A client may end its side once its request is sent (`printf … | nc -N`, some probes):
            // the request is still answered (NIO's pipeline handler closes once the answer is out).
            .childChannelOption(.allowRemoteHalfClosure, value: true)
            .childChannelInitializer { channel in
                // Failing the set-up closes the accepted connection at once.
                guard gate.admit() else { return channel.eventLoop.makeFailedFuture(ChannelError.ioOnClosedChannel) }
                channel.closeFuture.whenComplete { _ in gate.release() }
                return channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(AdminHTTPHandler(router: router, requestTimeout: limits.requestTimeout,
                                                                                    logger: logger))
                }
            }
            .bind(host: listen.bindHost, port: port).get()
        let server = AdminServer(channel: channel, port: channel.localAddress?.port ?? port)
        logger.info("HTTP endpoints (/metrics, /healthz, /readyz, /transfers, /notifications/s3) on \(listen.bindHost):\(server.port)")
        return server
    }

    private init(channel: any Channel, port: Int) {
        self.channel = channel
        self.port = port
    }

    public func stop() async {
        try? await channel.close()
    }
}

private final class AdminHTTPHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let router: AdminRouter
    private let logger: Logger
    private let requestTimeout: TimeAmount
    /// Closes the connection if its request has not all arrived by then.
    private var deadline: Scheduled<Void>?
    private var head: HTTPRequestHead?
    private var body: [UInt8] = []
    private var tooLarge = false
    /// Set once the request is whole and its answer is on the way (which closes the connection).
    private var answering = false
    /// The largest request body taken (notifications); beyond it the answer is 413.
    static let maxBodyBytes = 1 << 20

    init(router: AdminRouter, requestTimeout: TimeAmount, logger: Logger) {
        self.router = router
        self.requestTimeout = requestTimeout
        self.logger = logger
    }

    func handlerAdded(context: ChannelHandlerContext) {
        let channel = context.channel, logger = self.logger, timeout = requestTimeout
        deadline = context.eventLoop.scheduleTask(in: timeout) {
            logger.debug("admin HTTP connection closed: no whole request within \(timeout.nanoseconds / 1_000_000) ms")
            channel.close(promise: nil)
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        deadline?.cancel()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
            body = []
            tooLarge = false
        case .body(var buffer):
            if body.count + buffer.readableBytes > Self.maxBodyBytes {
                tooLarge = true
                body = []
            } else if !tooLarge, let bytes = buffer.readBytes(length: buffer.readableBytes) {
                body += bytes
            }
        case .end:
            guard let head else { return }
            self.head = nil
            answering = true
            deadline?.cancel()
            if tooLarge {
                write(.error(413, "request body larger than \(Self.maxBodyBytes) bytes"), version: head.version, context: context)
                return
            }
            let router = self.router
            let requestBody = body
            body = []
            let peer = context.remoteAddress?.description ?? "unknown"
            let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            // HEAD is GET without the body (RFC 9110 §9.3.2), for probes that ask that way.
            let isHead = head.method == .HEAD
            context.eventLoop.makeFutureWithTask {
                await router.respond(method: isHead ? "GET" : head.method.rawValue, path: head.uri,
                                     authorization: head.headers.first(name: "authorization"), body: requestBody, peer: peer)
            }.whenSuccess { response in
                let (handler, context) = bound.value
                handler.write(response, version: head.version, withBody: !isHead, context: context)
            }
        }
    }

    private func write(_ response: AdminRouter.Response, version: HTTPVersion, withBody: Bool = true, context: ChannelHandlerContext) {
        var headers = HTTPHeaders()
        headers.add(name: "content-type", value: response.contentType)
        headers.add(name: "content-length", value: String(response.body.count))
        headers.add(name: "connection", value: "close")
        for (name, value) in response.headers.sorted(by: { $0.key < $1.key }) { headers.add(name: name, value: value) }
        let head = HTTPResponseHead(version: version, status: HTTPResponseStatus(statusCode: response.status), headers: headers)
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        if withBody {
            context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: response.body)))), promise: nil)
        }
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in channel.close(promise: nil) }
    }

    /// The client ended its side: answer a whole request, else close (half-closure
    /// is allowed only so that a request sent that way is still answered).
    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case ChannelEvent.inputClosed = event {
            if !answering { context.close(promise: nil) }
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        logger.debug("admin HTTP connection error: \(error)")
        context.close(promise: nil)
    }
}

/// Counts the admin server's open connections against its limit. Refusals
/// are logged at most once every ten seconds, with how many there were.
private final class ConnectionGate: Sendable {
    private let limit: Int
    private let logger: Logger
    private let state = Mutex((open: 0, refused: 0, lastLog: ContinuousClock.Instant?.none))

    init(limit: Int, logger: Logger) { self.limit = limit; self.logger = logger }

    func admit() -> Bool {
        let (admitted, report) = state.withLock { state -> (Bool, Int?) in
            guard state.open >= limit else { state.open += 1; return (true, nil) }
            state.refused += 1
            let now = ContinuousClock.now
            guard state.lastLog.map({ now - $0 >= .seconds(10) }) ?? true else { return (false, nil) }
            state.lastLog = now
            defer { state.refused = 0 }
            return (false, state.refused)
        }
        if let report {
            logger.warning("admin HTTP: \(report) connection(s) closed at once: \(limit) are open, the most allowed")
        }
        return admitted
    }

    func release() { state.withLock { $0.open -= 1 } }
}
