import FerryCore
import FerryTestSupport
import Foundation
import Testing

/// The table name read from a record's ARN, as it was read before (Foundation's
/// range(of:) and split), for generated ARNs.
@Suite struct TableNameTests {
    func reference(_ arn: String) -> String? {
        guard let range = arn.range(of: ":table/") else { return nil }
        return arn[range.upperBound...].split(separator: "/").first.map(String.init)
    }

    @Test func sameAsBefore() {
        var rng = SeededGenerator(seed: 0x7AB1E)
        let parts = ["arn:aws:dynamodb:us-east-1:1:", ":table/", "table/", "/", "//", "stream/", "objects", "é", ":", "", "x/y"]
        for n in 0..<3_000 {
            let arn = (0..<Int.random(in: 0...6, using: &rng)).map { _ in parts.randomElement(using: &rng)! }.joined()
            let record = DynamoDBEvent.Record(eventID: "e", eventName: .insert, awsRegion: "r", eventSourceARN: arn,
                                              dynamodb: StreamRecord(approximateCreationDateTime: 0, keys: [:], newImage: nil, oldImage: nil, sequenceNumber: "1",
                                                                     streamViewType: .keysOnly))
            #expect(record.tableName == reference(arn), "\(n): \(arn)")
        }
    }
}
