import Foundation

/// Where a request's terminal status is delivered, once per outcome
/// (TransferUtility's completion handler, for a producer that does not
/// follow the status topic): `kafka:<topic>`, a reply topic, or an `https://`
/// URL that receives it as a signed POST.
public enum CompletionCallback: Sendable, Hashable {
    case kafka(topic: String)
    case https(String)

    public static let maxLength = 2048

    /// Parses and checks a request's `callback`: a topic name of 1…249 of
    /// `[A-Za-z0-9._-]`, or an https URL with a host and no credentials in it.
    public init(_ text: String) throws(FerryError) {
        guard !text.isEmpty, text.utf8.count <= Self.maxLength else {
            throw FerryError(.invalidRequest, "callback must be 1…\(Self.maxLength) bytes")
        }
        if text.hasPrefix("kafka:") {
            let topic = String(text.dropFirst("kafka:".count))
            guard (1...249).contains(topic.utf8.count), topic != ".", topic != "..",
                  topic.utf8.allSatisfy({ $0.isTopicByte }) else {
                throw FerryError(.invalidRequest, "callback kafka:<topic> needs a topic of 1…249 characters of [A-Za-z0-9._-]")
            }
            self = .kafka(topic: topic)
            return
        }
        guard let url = URLComponents(string: text), url.scheme?.lowercased() == "https", let host = url.host, !host.isEmpty else {
            throw FerryError(.invalidRequest, "callback must be kafka:<topic> or an https:// URL")
        }
        guard url.user == nil, url.password == nil else {
            throw FerryError(.invalidRequest, "callback URL may not carry credentials; Ferry signs its callbacks instead")
        }
        if let problem = HeaderValueRule.violation(of: text, field: "callback") { throw problem }
        self = .https(text)
    }
}

private extension UInt8 {
    var isTopicByte: Bool {
        (0x30...0x39).contains(self) || (0x41...0x5A).contains(self) || (0x61...0x7A).contains(self)
            || self == 0x2E || self == 0x5F || self == 0x2D
    }
}
