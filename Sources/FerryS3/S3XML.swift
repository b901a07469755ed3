import FerryCore
import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif

/// S3's `<Error><Code>…</Code><Message>…</Message></Error>` body, mapped to a `FerryError`.
enum S3ErrorResponse {
    static func error(status: Int, body: [UInt8], operation: String, requestId: String?) -> FerryError {
        let fields = XMLFields.parse(body, wanted: ["Code", "Message"])
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

/// Reads the text of repeated elements (`<Part>…</Part>` in ListParts) as one
/// dictionary each, keyed by child element name.
enum XMLRecords {
    static func parse(_ bytes: [UInt8], record: String) -> [[String: String]] {
        guard !bytes.isEmpty else { return [] }
        let collector = Collector(record: record)
        let parser = XMLParser(data: Data(bytes))
        parser.delegate = collector
        _ = parser.parse()
        return collector.records
    }

    private final class Collector: NSObject, XMLParserDelegate {
        let record: String
        var records: [[String: String]] = []
        var current: [String: String]?
        var text = ""
        init(record: String) { self.record = record }

        func parser(_ parser: XMLParser, didStartElement name: String, namespaceURI: String?,
                    qualifiedName: String?, attributes: [String: String] = [:]) {
            if name == record { current = [:] }
            text = ""
        }
        func parser(_ parser: XMLParser, foundCharacters string: String) { text += string }
        func parser(_ parser: XMLParser, didEndElement name: String, namespaceURI: String?, qualifiedName: String?) {
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

/// Reads the text of the first occurrence of each wanted element of an XML document.
enum XMLFields {
    static func parse(_ bytes: [UInt8], wanted: Set<String>) -> [String: String] {
        guard !bytes.isEmpty else { return [:] }
        let collector = Collector(wanted: wanted)
        let parser = XMLParser(data: Data(bytes))
        parser.delegate = collector
        _ = parser.parse()
        return collector.values
    }

    private final class Collector: NSObject, XMLParserDelegate {
        let wanted: Set<String>
        var values: [String: String] = [:]
        var current: String?
        var text = ""
        init(wanted: Set<String>) { self.wanted = wanted }

        func parser(_ parser: XMLParser, didStartElement name: String, namespaceURI: String?,
                    qualifiedName: String?, attributes: [String: String] = [:]) {
            if wanted.contains(name), values[name] == nil { current = name; text = "" }
        }
        func parser(_ parser: XMLParser, foundCharacters string: String) {
            if current != nil { text += string }
        }
        func parser(_ parser: XMLParser, didEndElement name: String, namespaceURI: String?, qualifiedName: String?) {
            if name == current { values[name] = text; current = nil }
        }
    }
}
