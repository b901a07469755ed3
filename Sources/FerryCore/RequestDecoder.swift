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
        if let tooLarge = sizeFailure(bytes) { return .failure(tooLarge) }
        if let unclear = strictnessFailure(bytes) { return .failure(unclear) }
        let data = Data(bytes)
        return decodeTransfer(data, loose: looseObject(bytes))
    }

    /// `JSONSerialization`'s reading of a text StrictJSON took, for the fields
    /// that choose the path. Where it cannot read the whole (a number past a
    /// Double's range, such as 1e400, is valid JSON), the top-level members
    /// are read one by one and one it cannot read stands as `Unreadable`: the
    /// failure then names that member, not "message is not a JSON object".
    static func looseObject(_ bytes: [UInt8]) -> [String: Any]? {
        if let whole = try? FoundationJSON.object(bytes) { return whole as? [String: Any] }
        guard let members = StrictJSON.members(of: bytes) else { return nil }
        var object: [String: Any] = [:]
        for member in members {
            object[member.name] = (try? FoundationJSON.object(bytes[member.value], options: [.fragmentsAllowed])) ?? Unreadable()
        }
        return object
    }

    /// A member's value Foundation's reader refused (see `looseObject`).
    struct Unreadable {}

    /// A message over the size limit, refused before it is parsed.
    static func sizeFailure(_ bytes: [UInt8]) -> Failure? {
        guard bytes.count > RequestLimits.maxMessageBytes else { return nil }
        return Failure(error: FerryError(.requestTooLarge, "request is \(bytes.count) bytes; the limit is \(RequestLimits.maxMessageBytes)"),
                       id: nil, op: nil)
    }

    /// A message that is not strict JSON (see `StrictJSON`), refused before any
    /// reader picks a meaning for it. Its id and op are reported when the text
    /// names each once.
    static func strictnessFailure(_ bytes: [UInt8]) -> Failure? {
        guard let problem = StrictJSON.check(bytes) else { return nil }
        let error = problem.kind == .duplicateName
            ? FerryError(.invalidRequest, "\(problem); JSON readers differ on which value counts, so the request is refused")
            : FerryError(.malformedRequest, problem.refusing("message"))
        let members = StrictJSON.members(of: bytes) ?? []
        func once(_ name: String) -> String? {
            let found = members.filter { $0.name == name }
            return found.count == 1 ? StrictJSON.string(in: bytes, at: found[0].value) : nil
        }
        let id = once("id").flatMap { isValidId($0) ? $0 : nil }
        let op = once("op").flatMap { TransferOperation(rawValue: $0) != nil || ItemOperation(rawValue: $0) != nil ? $0 : nil }
        return Failure(error: error, id: id, op: op)
    }

    /// The transfer request in `data`, already parsed loosely (`loose`, nil when not a JSON object).
    static func decodeTransfer(_ data: Data, loose: [String: Any]?) -> Result<TransferRequest, Failure> {
        let id = loose?["id"] as? String
        let named = loose?["op"] as? String
        // Only an operation Ferry has goes on with the failure (into the status and the
        // metrics' op label): any other string would make one label value per message sent.
        let op = named.flatMap { TransferOperation(rawValue: $0) != nil || ItemOperation(rawValue: $0) != nil ? $0 : nil }
        func fail(_ code: FerryError.Code, _ message: String) -> Result<TransferRequest, Failure> {
            .failure(Failure(error: FerryError(code, message), id: id.flatMap(isValidId) == true ? id : nil, op: op))
        }
        guard let loose else {
            return fail(.malformedRequest, "message is not a JSON object")
        }
        if let op = loose["op"] as? String, TransferOperation(rawValue: op) == nil {
            return fail(.unsupportedOperation, "unknown op '\(TextClip.clipped(op, toUTF8: 64))'; expected one of upload, download, delete, copy")
        }
        let request: TransferRequest
        do {
            request = try JSONDecoder().decode(TransferRequest.self, from: data)
        } catch let DecodingError.keyNotFound(key, context) {
            return fail(.invalidRequest, "missing required field '\(DecodingProblem.path(context.codingPath + [key]))'")
        } catch let DecodingError.typeMismatch(_, context) {
            return fail(.invalidRequest, "wrong type for '\(DecodingProblem.path(context.codingPath))'")
        } catch let DecodingError.valueNotFound(_, context) {
            return fail(.invalidRequest, "null value for '\(DecodingProblem.path(context.codingPath))'")
        } catch let DecodingError.dataCorrupted(context) {
            // The decoder's own text is left out: it quotes the producer's value.
            return fail(.invalidRequest, "invalid value for '\(DecodingProblem.path(context.codingPath))'")
        } catch {
            return fail(.invalidRequest, "cannot decode request: \(error)")
        }
        if let problem = validate(request) {
            return fail(problem.code, problem.message)
        }
        return .success(request)
    }

    /// Rules beyond the JSON shape (see docs/producers/requests.md and docs/security.md,
    /// "Security notes"): each kind of value has one rule, applied here, so nothing
    /// downstream meets a value it has to re-check or normalise.
    public static func validate(_ r: TransferRequest) -> FerryError? {
        guard isValidId(r.id) else {
            return FerryError(.invalidRequest, "id must be 1-\(maxIdLength) characters of [A-Za-z0-9._:-]")
        }
        if r.bucket.isEmpty { return FerryError(.invalidRequest, "bucket is empty") }
        if let problem = RequestLimits.bucketNameProblem(r.bucket) { return problem }
        if let problem = ObjectKeyRule.violation(of: r.key) { return problem }
        if let identity = r.identityId, !identity.isEmpty, let problem = IdentityRule.violation(of: identity, field: "identityId") {
            return problem
        }
        if let target = r.targetIdentityId, !target.isEmpty,
           let problem = IdentityRule.violation(of: target, field: "targetIdentityId") {
            return problem
        }
        if let owner = r.sourceIdentityId, !owner.isEmpty, let problem = IdentityRule.violation(of: owner, field: "sourceIdentityId") {
            return problem
        }
        if r.op != .copy, r.sourceAccessLevel != nil || r.sourceIdentityId != nil {
            return FerryError(.invalidRequest, "sourceAccessLevel and sourceIdentityId apply to copy requests only")
        }
        // Who acts must be named for private objects and for writes of protected ones;
        // a protected read may name only the owner (targetIdentityId).
        let level = r.effectiveAccessLevel
        let needsIdentity = level == .private || (level == .protected && r.op != .download)
        if needsIdentity, r.identityId?.isEmpty ?? true {
            return FerryError(.invalidRequest, "accessLevel \(level.rawValue) needs an identityId")
        }
        switch r.op {
        case .upload:
            guard let source = r.source else { return FerryError(.invalidRequest, "upload needs a source") }
            if let problem = sourceProblem(source) { return problem }
        case .download:
            guard r.destination != nil else { return FerryError(.invalidRequest, "download needs a destination") }
        case .copy:
            guard let source = r.source else { return FerryError(.invalidRequest, "copy needs a source s3://bucket/key") }
            if let problem = copySourceProblem(source) { return problem }
        case .delete:
            break
        }
        if let type = r.contentType, let problem = HeaderValueRule.violation(of: type, field: "contentType") { return problem }
        if let metadata = r.metadata, let problem = MetadataRule.violation(of: metadata) { return problem }
        if let headers = r.headers, let problem = HeaderPolicy.violation(in: headers) { return problem }
        if let options = r.options, let problem = TransferOptionRanges.violation(of: options) { return problem }
        if let callback = r.callback {
            do { _ = try CompletionCallback(callback) } catch { return error }
        }
        return nil
    }

    /// A `data:` source must decode (strict base64 or percent-encoding, within
    /// the size limit) and its media type must be a valid header value. Other
    /// schemes are checked by the worker against its data root and remote-source policy.
    static func sourceProblem(_ source: String) -> FerryError? {
        if ChunkedSource.isChunked(source) {
            do { _ = try ChunkedSource(parsing: source) } catch { return error }
            return nil
        }
        guard source.utf8.count >= 5, source.prefix(5).lowercased() == "data:" else { return nil }
        do {
            _ = try DataURI.decode(source, limit: RequestLimits.maxDataURIBytes)
        } catch {
            return error
        }
        if let type = DataURI.mediaType(source), let problem = HeaderValueRule.violation(of: type, field: "the data: URI's media type") {
            return problem
        }
        return nil
    }

    /// A copy source is `s3://bucket/key` with a valid bucket name and a key that passes the key rule.
    static func copySourceProblem(_ source: String) -> FerryError? {
        guard source.hasPrefix("s3://") else { return FerryError(.invalidRequest, "copy source must be s3://bucket/key") }
        let rest = source.dropFirst(5)
        guard let slash = rest.firstIndex(of: "/") else { return FerryError(.invalidRequest, "copy source names no key") }
        if let problem = RequestLimits.bucketNameProblem(String(rest[..<slash])) { return problem }
        return ObjectKeyRule.violation(of: String(rest[rest.index(after: slash)...]), field: "copy source key")
    }

    static func isValidId(_ id: String) -> Bool {
        (1...maxIdLength).contains(id.utf8.count) && id.utf8.allSatisfy(isIdByte)
    }

    /// Why `id` can be no transfer's id (nil when it can be): for commands
    /// that name a transfer, which could never reach one with it.
    public static func idProblem(_ id: String) -> FerryError? {
        isValidId(id) ? nil : FerryError(.invalidRequest, "'\(id.prefix(200))' is no transfer id: ids are 1-\(maxIdLength) characters of [A-Za-z0-9._:-]")
    }
}
