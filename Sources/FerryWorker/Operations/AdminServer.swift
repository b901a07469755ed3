import FerryCore
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix

/// The worker's small HTTP server (metrics, health, admin API) on swift-nio.
/// Each connection carries one request; the answer closes it.
public final class AdminServer: Sendable {
    private let channel: any Channel
    /// The address actually bound (port 0 picks a free one).
    public let port: Int

    /// Binds `address` (`HOST:PORT`).
    public static func start(address: String, router: AdminRouter, logger: Logger) async throws -> AdminServer {
        guard let colon = address.lastIndex(of: ":"), let port = Int(address[address.index(after: colon)...]) else {
            throw ConfigurationError("http address '\(address)' is not HOST:PORT")
        }
        let host = String(address[..<colon]).trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.backlog, value: 64)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(AdminHTTPHandler(router: router, logger: logger))
                }
            }
            .bind(host: host.isEmpty ? "0.0.0.0" : host, port: port).get()
        let server = AdminServer(channel: channel, port: channel.localAddress?.port ?? port)
        logger.info("HTTP endpoints (/metrics, /healthz, /readyz, /transfers, /notifications/s3) on \(host.isEmpty ? "0.0.0.0" : host):\(server.port)")
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
    private var head: HTTPRequestHead?
    private var body: [UInt8] = []
    private var tooLarge = false
    /// The largest request body taken (notifications); beyond it the answer is 413.
    static let maxBodyBytes = 1 << 20

    init(router: AdminRouter, logger: Logger) {
        self.router = router
        self.logger = logger
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
            if tooLarge {
                write(.error(413, "request body larger than \(Self.maxBodyBytes) bytes"), version: head.version, context: context)
                return
            }
            let router = self.router
            let requestBody = body
            body = []
            let peer = context.remoteAddress?.description ?? "unknown"
            let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            context.eventLoop.makeFutureWithTask {
                await router.respond(method: head.method.rawValue, path: head.uri,
                                     authorization: head.headers.first(name: "authorization"), body: requestBody, peer: peer)
            }.whenSuccess { response in
                let (handler, context) = bound.value
                handler.write(response, version: head.version, context: context)
            }
        }
    }

    private func write(_ response: AdminRouter.Response, version: HTTPVersion, context: ChannelHandlerContext) {
        var headers = HTTPHeaders()
        headers.add(name: "content-type", value: response.contentType)
        headers.add(name: "content-length", value: String(response.body.count))
        headers.add(name: "connection", value: "close")
        for (name, value) in response.headers.sorted(by: { $0.key < $1.key }) { headers.add(name: name, value: value) }
        let head = HTTPResponseHead(version: version, status: HTTPResponseStatus(statusCode: response.status), headers: headers)
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: response.body)))), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in context.close(promise: nil) }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        logger.debug("admin HTTP connection error: \(error)")
        context.close(promise: nil)
    }
}
