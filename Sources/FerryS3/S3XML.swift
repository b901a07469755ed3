import FerryCore
import FerryStorage
import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif

/// S3's `<Error><Code>…</Code><Message>…</Message></Error>` body, mapped to a `FerryError`.
enum S3ErrorResponse {
    static func error(status: Int, body: [UInt8], operation: String, requestId: String?) -> FerryError {
        error(status: status, fields: fields(body), operation: operation, requestId: requestId)
    }

    /// The fields `error(status:fields:…)` and `isClockSkew` read, parsed once.
    static func fields(_ body: [UInt8]) -> [String: String] {
        XMLFields.parse(body, wanted: ["Code", "Message"])
    }

    static func error(status: Int, fields: [String: String], operation: String, requestId: String?) -> FerryError {
        // The server's words, bounded: they travel on in statuses, logs and failure records.
        let s3Code = fields["Code"].map { TextClip.clipped($0, toUTF8: 128) } ?? defaultCode(status)
        let message = fields["Message"].map { ": \(TextClip.clipped($0, toUTF8: 1024))" } ?? ""
        let suffix = requestId.map { " (request id \($0))" } ?? ""
        let text = "\(operation) failed with HTTP \(status) \(s3Code)\(message)\(suffix)"
        switch s3Code {
        case "NoSuchKey", "NotFound": return FerryError(.noSuchKey, text)
        case "NoSuchBucket": return FerryError(.noSuchBucket, text)
        case "AccessDenied", "SignatureDoesNotMatch", "InvalidAccessKeyId", "ExpiredToken", "Forbidden":
            return FerryError(.accessDenied, text)
        case "SlowDown": return FerryError(.slowDown, text)
        case "PreconditionFailed": return FerryError(.preconditionFailed, text)
        case "InvalidRange": return FerryError(.invalidRange, text)
        case "NoSuchUpload": return FerryError(.noSuchUpload, text)
        case "BadDigest", "InvalidDigest", "XAmzContentChecksumMismatch", "XAmzContentSHA256Mismatch":
            return FerryError(.badDigest, text)
        default: return FerryError(.storageError, text)
        }
    }

    /// S3's refusal of a signature dated too far from the server's clock
    /// (more than 15 minutes). A HEAD's refusal has no body to say so.
    static func isClockSkew(_ fields: [String: String]) -> Bool {
        fields["Code"] == "RequestTimeTooSkewed"
    }

    /// HEAD responses carry no body: name the code from the status.
    private static func defaultCode(_ status: Int) -> String {
        switch status {
        case 404: return "NotFound"
        case 412: return "PreconditionFailed"
        case 416: return "InvalidRange"
        case 403: return "Forbidden"
        case 503: return "SlowDown"
        default: return "HTTP\(status)"
        }
    }
}

/// An S3 answer's XML document, read in one pass: its root element, the
/// children of each repeated `record` element (`<Contents>` of a listing) as
/// one dictionary each, and the first text of each `wanted` element.
struct S3Document {
    var root: String?
    var records: [[String: String]] = []
    var fields: [String: String] = [:]
    /// Why the bytes are not one whole, well-formed document; nil when they are.
    var problem: String?

    static func parse(_ bytes: [UInt8], record: String? = nil, wanted: Set<String> = []) -> S3Document {
        guard !bytes.isEmpty else { return S3Document(problem: "it is empty") }
        // FoundationXML traps on a name that is not UTF-8 ("<\u{F3}\u{A4}\u{8F}U" stops the
        // process): bytes that are not UTF-8 are never handed to it. S3 answers in UTF-8.
        guard String(validating: bytes, as: UTF8.self) != nil else { return S3Document(problem: "it is not UTF-8 text") }
        let collector = Collector(record: record, wanted: wanted)
        let parser = XMLParser(data: Data(bytes))
        parser.delegate = collector
        let complete = parser.parse()
        var document = S3Document(root: collector.root, records: collector.records, fields: collector.values)
        if !complete {
            let code = (parser.parserError as NSError?)?.code ?? -1
            document.problem = "it is not well-formed XML (parser error \(code) at line \(parser.lineNumber))"
        } else if !collector.rootClosed {
            // FoundationXML's parser reports no error for a document that just stops.
            document.problem = collector.root == nil ? "it holds no XML element" : "it ends before its root element does (cut short)"
        }
        return document
    }

    /// The document an operation expects: whole, well-formed, with `root` (or
    /// one of `alsoAccepted`: moto names ListParts' root `ListPartsResponse`) at
    /// its root. Anything else (a page cut short, a proxy's HTML, an empty
    /// body) is an error, never read as an answer with nothing in it: an empty
    /// listing would tell the reconciler every key was deleted. An `<Error>`
    /// document is the error it holds.
    static func expect(_ response: HTTPResponse, root: String, alsoAccepted: Set<String> = [], record: String? = nil,
                       wanted: Set<String> = [], operation: String) throws(FerryError) -> S3Document {
        let document = parse(response.body, record: record, wanted: wanted)
        if document.root == "Error" {
            throw S3ErrorResponse.error(status: response.status, body: response.body, operation: operation,
                                        requestId: response.header("x-amz-request-id"))
        }
        let found = document.root ?? ""
        let problem = document.problem ?? (found == root || alsoAccepted.contains(found) ? nil
            : "its root element is <\(TextClip.clipped(found, toUTF8: 64))>, not <\(root)>")
        guard let problem else { return document }
        throw FerryError(.storageError, "\(operation) answered HTTP \(response.status) with \(response.body.count) bytes that are not "
            + "a whole \(root) document: \(problem)")
    }

    private final class Collector: NSObject, XMLParserDelegate {
        let record: String?
        let wanted: Set<String>
        var root: String?
        var depth = 0
        var rootClosed = false
        var records: [[String: String]] = []
        var values: [String: String] = [:]
        var current: [String: String]?
        var field: String?
        var text = ""
        init(record: String?, wanted: Set<String>) { self.record = record; self.wanted = wanted }

        func parser(_ parser: XMLParser, didStartElement name: String, namespaceURI: String?,
                    qualifiedName: String?, attributes: [String: String] = [:]) {
            if root == nil { root = name }
            depth += 1
            if name == record { current = [:] }
            if field == nil, wanted.contains(name), values[name] == nil { field = name }
            text = ""
        }
        func parser(_ parser: XMLParser, foundCharacters string: String) { text += string }
        func parser(_ parser: XMLParser, didEndElement name: String, namespaceURI: String?, qualifiedName: String?) {
            depth -= 1
            if depth == 0 { rootClosed = true }
            if name == field { values[name] = text; field = nil }
            if name == record, let c = current {
                records.append(c)
                current = nil
            } else if current != nil, current?[name] == nil {
                current?[name] = text
            }
            text = ""
        }
    }
}

/// The first text of each wanted element of a document, read leniently (an
/// error document, a result whose fields are optional).
enum XMLFields {
    static func parse(_ bytes: [UInt8], wanted: Set<String>) -> [String: String] {
        S3Document.parse(bytes, wanted: wanted).fields
    }
}
