import FerryCore
import FerryTestSupport
import Foundation
import Testing

/// A stream record's own writer gives byte for byte what `StreamingJSONEncoder`
/// gives (the same dictionary is walked in the same order), and that reads back
/// to the record: for generated records with hostile strings, every attribute
/// type, nested maps and lists, and the optional members present or not.
@Suite struct StreamRecordJSONTests {
    let generate = StreamingJSONEncoderTests()

    func record(_ rng: inout SeededGenerator) -> DynamoDBEvent.Record {
        let keys: AttributeMap = Bool.random(using: &rng)
            ? ["bucket": .string(generate.text(&rng)), "key": .string(generate.text(&rng))]
            : ["id": .string(generate.text(&rng))]
        let image = keys.merging((0..<Int.random(in: 0...8, using: &rng)).map { _ in
            (generate.text(&rng), generate.attribute(&rng)) }) { a, _ in a }
        return DynamoDBEvent.Record(
            eventID: generate.text(&rng), eventName: [.insert, .modify, .remove].randomElement(using: &rng)!,
            awsRegion: generate.text(&rng),
            eventSourceARN: "arn:aws:dynamodb:us-east-1:000000000000:table/\(generate.text(&rng))/stream/ferry",
            userIdentity: Bool.random(using: &rng) ? .service : nil,
            dynamodb: StreamRecord(
                approximateCreationDateTime: Bool.random(using: &rng) ? Double.random(in: 0...2e9, using: &rng) : nil,
                keys: keys, newImage: Bool.random(using: &rng) ? image : nil, oldImage: Bool.random(using: &rng) ? image : nil,
                sequenceNumber: String(UInt64.random(in: 0 ... .max, using: &rng)),
                streamViewType: StreamViewType.allCases.randomElement(using: &rng)!))
    }

    @Test func generatedRecordsMatchTheEncoderByteForByte() throws {
        var rng = SeededGenerator(seed: 0x5EC0_4D)
        for n in 0..<1000 {
            let record = record(&rng)
            let direct = try record.jsonBytes()
            let encoded = try StreamingJSONEncoder().encode(record)
            #expect(direct == encoded, "record \(n): \(String(decoding: direct, as: UTF8.self)) vs \(String(decoding: encoded, as: UTF8.self))")
            #expect(try JSONDecoder().decode(DynamoDBEvent.Record.self, from: Data(direct)) == record, "record \(n)")
        }
    }

    @Test func aBatchIsTheHandlersEventShape() throws {
        var rng = SeededGenerator(seed: 0xBA7C)
        for size in [0, 1, 3] {
            let event = DynamoDBEvent(records: (0..<size).map { _ in record(&rng) })
            let direct = try event.jsonBytes()
            #expect(direct == (try StreamingJSONEncoder().encode(event)))
            #expect(try JSONDecoder().decode(DynamoDBEvent.self, from: Data(direct)) == event)
        }
    }

    /// JSON has no NaN: refused, as `JSONEncoder` refuses it, not written.
    @Test func aNonFiniteCreationTimeIsRefused() throws {
        var rng = SeededGenerator(seed: 1)
        for bad in [Double.nan, .infinity, -.infinity] {
            var broken = record(&rng)
            broken.dynamodb.approximateCreationDateTime = bad
            #expect(throws: DynamoDBEvent.Record.NonFiniteNumber.self) { try broken.jsonBytes() }
            #expect(throws: (any Error).self) { try JSONEncoder().encode(broken) }
        }
    }
}
