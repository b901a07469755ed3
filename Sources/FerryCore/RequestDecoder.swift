import Foundation

/// Turns the bytes of a Kafka message into a validated `TransferRequest`, or a
/// `FerryError` whose code says why not. Never traps on any input.
public enum RequestDecoder {
    /// What is known of a message that failed: its `id`, if one could be read,
    /// so a `rejected` status can be published for it.
    public struct Failure: Error, Sendable {
        public var error: FerryError
        public var id: String?
        public var op: String?
    }

    public static let maxIdLength = 128

    public static func decode(_ bytes: [UInt8]) -> Result<TransferRequest, Failure> {
        guard bytes.count <= RequestLimits.maxMessageBytes else {
            return .failure(Failure(error: FerryError(.requestTooLarge, "request is \(bytes.count) bytes; the limit is \(RequestLimits.maxMessageBytes)"),
                                    id: nil, op: nil))
        }
        let data = Data(bytes)
        let loose = try? JSONSerialization.jsonObject(with: data) as? [String: Any]
        let id = loose?["id"] as? String
        let op = loose?["op"] as? String
        func fail(_ code: FerryError.Code, _ message: String) -> Result<TransferRequest, Failure> {
            .failure(Failure(error: FerryError(code, message), id: id.flatMap(isValidId) == true ? id : nil, op: op))
        }
        guard let loose else {
            return fail(.malformedRequest, "message is not a JSON object")
        }
        if let op = loose["op"] as? String, TransferOperation(rawValue: op) == nil {
            return fail(.unsupportedOperation, "unknown op '\(op)'; expected one of upload, download, delete, copy")
        }
        let request: TransferRequest
        do {
            request = try JSONDecoder().decode(TransferRequest.self, from: data)
        } catch let DecodingError.keyNotFound(key, _) {
            return fail(.invalidRequest, "missing required field '\(key.stringValue)'")
        } catch let DecodingError.typeMismatch(_, context) {
            return fail(.invalidRequest, "wrong type for '\(path(context))'")
        } catch let DecodingError.valueNotFound(_, context) {
            return fail(.invalidRequest, "null value for '\(path(context))'")
        } catch let DecodingError.dataCorrupted(context) {
            return fail(.invalidRequest, "invalid value for '\(path(context))'")
        } catch {
            return fail(.invalidRequest, "cannot decode request: \(error)")
        }
        if let problem = validate(request) {
            return fail(problem.code, problem.message)
        }
        return .success(request)
    }

    /// Rules beyond the JSON shape (see README, "Request JSON").
    public static func validate(_ r: TransferRequest) -> FerryError? {
        guard isValidId(r.id) else {
            return FerryError(.invalidRequest, "id must be 1-\(maxIdLength) characters of [A-Za-z0-9._:-]")
        }
        guard !r.bucket.isEmpty else { return FerryError(.invalidRequest, "bucket is empty") }
        guard !r.key.isEmpty else { return FerryError(.invalidRequest, "key is empty") }
        switch r.op {
        case .upload:
            guard r.source != nil else { return FerryError(.invalidRequest, "upload needs a source") }
        case .download:
            guard r.destination != nil else { return FerryError(.invalidRequest, "download needs a destination") }
        case .copy:
            guard r.source != nil else { return FerryError(.invalidRequest, "copy needs a source s3://bucket/key") }
        case .delete:
            break
        }
        if let headers = r.headers, let problem = HeaderPolicy.violation(in: headers) { return problem }
        let level = r.effectiveAccessLevel
        if level != .guest, r.identityId?.isEmpty ?? true {
            return FerryError(.invalidRequest, "accessLevel \(level.rawValue) needs an identityId")
        }
        return nil
    }

    static func isValidId(_ id: String) -> Bool {
        guard (1...maxIdLength).contains(id.utf8.count) else { return false }
        return id.utf8.allSatisfy { c in
            (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A)
                || c == 0x2E || c == 0x5F || c == 0x3A || c == 0x2D
        }
    }

    private static func path(_ context: DecodingError.Context) -> String {
        context.codingPath.map(\.stringValue).joined(separator: ".")
    }
}
