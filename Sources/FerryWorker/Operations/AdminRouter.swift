import FerryCore
import FerryEngine
import FerryStore
import Foundation
import Prometheus

/// The routes of the worker's HTTP port, as a plain function from method and
/// path to a response (the NIO server only carries bytes):
///
///     GET  /healthz                          alive
///     GET  /readyz                           200 or 503 with the checks
///     GET  /metrics                          Prometheus text format
///     GET  /transfers                        this worker's transfers in flight
///     GET  /transfers/ID                     one transfer: in flight here, or finished here
///     POST /transfers/ID/pause|resume|cancel steer a transfer running here
///     POST /notifications/s3                 a store's bucket notification (role ingest)
///
/// The /transfers routes show object keys and change state: they need
/// `Authorization: Bearer <admin token>` and are off without a configured
/// token. Health and metrics stay open (probes and scrapers carry no secret).
public struct AdminRouter: Sendable {
    public struct Response: Sendable, Equatable {
        public var status: Int
        public var contentType: String
        public var body: [UInt8]
        public var headers: [String: String] = [:]

        static func json<T: Encodable>(_ status: Int, _ value: T) -> Response {
            return Response(status: status, contentType: "application/json", body: ((try? FerryJSON.encodeSorted(value)) ?? []) + [0x0A])
        }

        static func error(_ status: Int, _ message: String) -> Response { json(status, ["error": message]) }
    }

    let workerId: String
    let health: WorkerHealth
    let metrics: PrometheusCollectorRegistry
    let inFlight: InFlightTransfers?
    let engine: TransferEngine?
    let state: WorkerStateStore?
    /// The bearer token of the /transfers routes; nil turns them off.
    var adminToken: String?
    /// Receives store notifications (the ingest role); nil answers 404.
    var notifications: NotificationEndpoint?

    public init(workerId: String, health: WorkerHealth, metrics: PrometheusCollectorRegistry, inFlight: InFlightTransfers?,
                engine: TransferEngine?, state: WorkerStateStore?, adminToken: String? = nil) {
        self.workerId = workerId; self.health = health; self.metrics = metrics; self.inFlight = inFlight
        self.engine = engine; self.state = state; self.adminToken = adminToken
    }

    public func respond(method: String, path rawPath: String, authorization: String? = nil, body: [UInt8] = [],
                        peer: String = "unknown") async -> Response {
        let path = rawPath.split(separator: "?", maxSplits: 1).first.map(String.init) ?? rawPath
        let parts = path.split(separator: "/").map(String.init)
        if parts.first == "transfers", let refusal = refusal(authorization) { return refusal }
        if parts == ["notifications", "s3"] {
            guard method == "POST" else { return .error(405, "\(method) is not allowed on \(path)") }
            guard let notifications else { return .error(404, "this worker does not ingest notifications (role ingest)") }
            return await notifications.receive(uri: rawPath, authorization: authorization, body: body, peer: peer)
        }
        switch (method, parts.first, parts.count) {
        case ("GET", "healthz", 1):
            return .json(200, ["status": "ok", "worker": workerId])
        case ("GET", "readyz", 1):
            let report = health.report()
            return .json(report.ready ? 200 : 503, report)
        case ("GET", "metrics", 1):
            ProcessGauges.update()
            return Response(status: 200, contentType: "text/plain; version=0.0.4; charset=utf-8", body: metrics.emitToBuffer())
        case ("GET", "transfers", 1):
            return .json(200, TransferList(worker: workerId, transfers: inFlight?.all ?? []))
        case ("GET", "transfers", 2):
            return await transfer(parts[1].removingPercentEncoding ?? parts[1])
        case ("POST", "transfers", 3):
            return steer(parts[1].removingPercentEncoding ?? parts[1], action: parts[2])
        case (_, "healthz", 1), (_, "readyz", 1), (_, "metrics", 1), (_, "transfers", _):
            return .error(405, "\(method) is not allowed on \(path)")
        default:
            return .error(404, "no route \(path); see /healthz, /readyz, /metrics, /transfers")
        }
    }

    /// Why a /transfers request may not proceed, or nil when its token is the admin token.
    private func refusal(_ authorization: String?) -> Response? {
        guard let adminToken else {
            return .error(403, "the /transfers routes are off: start the worker with --admin-token-file or FERRY_ADMIN_TOKEN")
        }
        let prefix = "bearer "
        guard let authorization, authorization.lowercased().hasPrefix(prefix),
              ConstantTime.equal(Array(authorization.utf8.dropFirst(prefix.count)), Array(adminToken.utf8)) else {
            var response = Response.error(401, "the /transfers routes need Authorization: Bearer <admin token>")
            response.headers["www-authenticate"] = #"Bearer realm="ferry-admin""#
            return response
        }
        return nil
    }

    struct TransferList: Encodable {
        var worker: String
        var transfers: [InFlightTransfers.Entry]
    }

    private func transfer(_ id: String) async -> Response {
        if let entry = inFlight?.entry(id) { return .json(200, entry) }
        if let finished = try? await state?.finishedStatus(id: id) { return .json(200, finished) }
        return .error(404, "transfer \(id) is neither running nor finished on this worker")
    }

    private func steer(_ id: String, action: String) -> Response {
        guard let control = engine?.control(for: id) else {
            return .error(404, "transfer \(id) is not running on this worker")
        }
        let done: Bool
        switch action {
        case "pause": done = control.pause()
        case "resume": done = control.resume()
        case "cancel": control.cancel(); done = true
        default: return .error(404, "unknown action \(action); use pause, resume or cancel")
        }
        guard done else { return .error(409, "transfer \(id) is \(control.state.rawValue): cannot \(action)") }
        return .json(202, ["id": id, "action": action, "state": control.state.rawValue])
    }
}
