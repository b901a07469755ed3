import FerryCore
import FerryTriggerKit
@testable import FerryTriggers
import Foundation
import Testing

/// Lambda's filter rule syntax against stream records.
@Suite struct FilterCriteriaTests {
    static let record = DynamoDBEvent.Record(
        eventID: "e1", eventName: .modify, awsRegion: "us-east-1",
        eventSourceARN: "arn:aws:dynamodb:us-east-1:000000000000:table/objects/stream/ferry",
        dynamodb: StreamRecord(approximateCreationDateTime: 1_700_000_000, keys: ["bucket": .string("b"), "key": .string("public/photos/a.JPG")],
                               newImage: ["size": .number(2048), "contentType": .string("image/jpeg"), "owner": .string("alice"),
                                          "tags": .stringSet(["red", "blue"])],
                               oldImage: nil, sequenceNumber: "1000000000000000000010000", streamViewType: .newAndOldImages))

    @Test(arguments: [
        (#"{"eventName":["MODIFY"]}"#, true),                                                        // equals
        (#"{"eventName":["INSERT","REMOVE"]}"#, false),
        (#"{"dynamodb":{"Keys":{"key":{"S":[{"prefix":"public/photos/"}]}}}}"#, true),               // prefix
        (#"{"dynamodb":{"Keys":{"key":{"S":[{"suffix":".jpg"}]}}}}"#, false),                       // suffix is case-sensitive
        (#"{"dynamodb":{"Keys":{"key":{"S":[{"suffix":".JPG"}]}}}}"#, true),
        (#"{"dynamodb":{"NewImage":{"owner":{"S":[{"equals-ignore-case":"ALICE"}]}}}}"#, true),
        (#"{"dynamodb":{"NewImage":{"owner":{"S":[{"anything-but":["bob","carol"]}]}}}}"#, true),   // anything-but
        (#"{"dynamodb":{"NewImage":{"owner":{"S":[{"anything-but":"alice"}]}}}}"#, false),
        (#"{"dynamodb":{"NewImage":{"contentType":{"S":[{"anything-but":{"prefix":"image/"}}]}}}}"#, false),
        (#"{"dynamodb":{"NewImage":{"size":{"N":[{"numeric":[">",1024,"<=",4096]}]}}}}"#, true),    // numeric range, N as string
        (#"{"dynamodb":{"NewImage":{"size":{"N":[{"numeric":["<",1024]}]}}}}"#, false),
        (#"{"dynamodb":{"NewImage":{"size":{"N":[{"numeric":["=",2048]}]}}}}"#, true),
        (#"{"dynamodb":{"OldImage":[{"exists":false}]}}"#, true),                                      // exists
        (#"{"dynamodb":{"NewImage":{"owner":[{"exists":true}]}}}"#, true),
        (#"{"dynamodb":{"NewImage":{"missing":[{"exists":true}]}}}"#, false),
        (#"{"dynamodb":{"NewImage":{"tags":{"SS":["blue"]}}}}"#, true),                              // a list matches by element
        (#"{"eventName":["MODIFY"],"dynamodb":{"NewImage":{"owner":{"S":["bob"]}}}}"#, false),       // fields are ANDed
    ])
    func rule(pattern: String, matches: Bool) throws {
        #expect(try FilterCriteria(patterns: [pattern]).matches(Self.record) == matches)
    }

    /// A key that starts with U+FEFF is another key: Foundation's reader
    /// dropped the mark, so a prefix rule matched a key it does not start and
    /// a pattern written with the mark matched keys without it.
    @Test func aLeadingByteOrderMarkIsPartOfTheValue() throws {
        var marked = Self.record
        marked.dynamodb.keys["key"] = .string("\u{FEFF}public/photos/a.JPG")
        let plain = try FilterCriteria(patterns: [#"{"dynamodb":{"Keys":{"key":{"S":[{"prefix":"public/"}]}}}}"#])
        let withMark = try FilterCriteria(patterns: ["{\"dynamodb\":{\"Keys\":{\"key\":{\"S\":[{\"prefix\":\"\u{FEFF}public/\"}]}}}}"])
        #expect(plain.matches(Self.record) && !plain.matches(marked))
        #expect(withMark.matches(marked) && !withMark.matches(Self.record))
    }

    @Test func patternsAreORedAndNoneMeansAll() throws {
        #expect(FilterCriteria().matches(Self.record))
        let either = try FilterCriteria(patterns: [#"{"eventName":["INSERT"]}"#, #"{"eventName":["MODIFY"]}"#])
        #expect(either.matches(Self.record))
    }

    @Test(arguments: [
        "not json",
        #"{"eventName":"MODIFY"}"#,                                   // a leaf must be a list
        #"{"eventName":[{"prefix":1}]}"#,
        #"{"eventName":[{"wildcard":"x*"}]}"#,                         // unknown rule
        #"{"dynamodb":{"NewImage":{"size":{"N":[{"numeric":[">"]}]}}}}"#,
        #"{"eventName":["INSERT"],"eventName":["REMOVE"]}"#,           // a field twice: which counts is the reader's guess
        #"{"eventName":["INSERT"],}"#,
    ])
    func malformedPatternsAreRefusedAtStartUp(pattern: String) {
        #expect(throws: TriggerRegistrationError.self) { try FilterCriteria(patterns: [pattern]) }
    }
}
