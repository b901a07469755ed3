import FerryCore
import FerryTestSupport
import Foundation
import Testing

/// What `ferry triggers test` and the configuration loader say about a
/// document that does not decode: where, and what is wrong, on one line.
@Suite struct DecodingProblemTests {
    @Test func namesThePlaceAndTheFault() throws {
        func problem<T: Decodable>(_ type: T.Type, _ json: String) -> String {
            do {
                _ = try JSONDecoder().decode(type, from: Data(json.utf8))
                return "decoded"
            } catch {
                return DecodingProblem.describe(error)
            }
        }
        #expect(problem(S3Event.self, #"{}"#) == "missing required field 'Records'")
        #expect(problem(S3Event.self, #"{"Records":[{"s3":{}}]}"#) == "missing required field 'Records[0].eventName'")
        #expect(problem(S3Event.self, #"{"Records":[{"eventName":5}]}"#) == "wrong type for 'Records[0].eventName' (expected a string)")
        #expect(problem(S3Event.self, #"[1]"#) == "wrong type for '(the document)' (expected an object)")
        #expect(problem(S3Event.self, #"{"Records":null}"#) == "null value for 'Records'")
        #expect(problem(S3Event.self, "{\"Rec") .contains("JSON"))
    }

    /// Seeded hostile variants of the events Ferry sends: every failure is
    /// described on one bounded line, with no coding-key dumps.
    @Test func everyFailureReadsAsOneLine() throws {
        let samples = ["s3-put", "s3-delete", "objects-insert", "posts-insert"].map {
            try! String(contentsOf: TestPaths.repositoryRoot.appendingPathComponent("triggers/events/\($0).json"), encoding: .utf8)
        }
        var rng = HostileInput.rng(seed: 0xDEC0DE)
        var failures = 0
        for n in 0..<1000 {
            let variant = HostileJSON.variant(of: samples[n % samples.count], &rng)
            let data = Data(variant.bytes)
            let error: (any Error)?
            if n % samples.count < 2 {
                error = Result { try JSONDecoder().decode(S3Event.self, from: data) }.failure
            } else {
                error = Result { try JSONDecoder().decode(DynamoDBEvent.self, from: data) }.failure
            }
            guard let error else { continue }
            failures += 1
            let text = DecodingProblem.describe(error)
            #expect(!text.contains("\n") && !text.contains("CodingKeys") && !text.contains("Debug description"), "\(variant): \(text)")
            #expect(text.utf8.count <= 600, "\(variant): \(text.utf8.count) bytes")
        }
        #expect(failures > 250, "\(failures) of 1000 variants failed to decode")
    }
}

private extension Result {
    var failure: Failure? { if case .failure(let error) = self { error } else { nil } }
}
