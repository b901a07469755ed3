import FerryCore
import FerryTestSupport
@testable import FerryWorker
import Foundation
import PropertyBased
import Testing

/// Invariant: no configuration file stops the process that reads it. Each
/// generated variant of a complete file (JSON is YAML) is read into settings
/// and trigger declarations, or refused with a `ConfigurationError` naming
/// the problem. (A filter pattern that was a number made Foundation's
/// JSONSerialization trap, not throw.) `HostileConfigurationTests` runs
/// `ferry config check` on variants too, through everything it validates.
@Suite struct ConfigurationFilePropertyTests {
    static let file = #"""
    {"worker":{"dataRoot":"/srv/data","maxTransfers":8,"shutdownGrace":30},
     "kafka":{"bootstrapServers":"127.0.0.1:9092","properties":{"compression.type":"lz4"}},
     "transfers":{"partSize":"8MiB","checksum":"CRC32C"},
     "access":{"guestPermissions":{"guest":["read","write"]},"copySourceBuckets":["shared"]},
     "triggers":[{"name":"notify","type":"webhook","url":"https://hooks.example.com/ferry","events":["ObjectCreated:*"],
                  "headers":{"Authorization":"Bearer x"}},
                 {"name":"big","type":"kafka","topic":"analytics.objects","table":"objects","viewType":"NEW_IMAGE",
                  "filters":[{"eventName":["INSERT"],"dynamodb":{"NewImage":{"size":{"N":[{"numeric":[">",1000000]}]}}}},
                             "{\"eventName\":[\"REMOVE\"]}"]}]}
    """#

    static let variants = Generator<HostileJSON.Variant, Shrink.None<HostileJSON.Variant>> { rng in
        HostileJSON.variant(of: file, &rng)
    }

    @Test func everyFileIsReadOrRefusedWithAReason() async {
        #expect((try? ConfigurationSources(fileText: Self.file, environment: [:]))?.targets.count == 2, "the file the variants start from")
        await propertyCheck(count: 1500, input: Self.variants) { variant in
            await Task.yield()
            let text = String(decoding: variant.bytes, as: UTF8.self)
            if case .failure(let error) = Result(catching: { () throws(ConfigurationError) in try ConfigurationSources(fileText: text, environment: [:]) }) {
                #expect(!error.description.isEmpty, "\(variant)")
            }
        }
    }

    /// Invariant: a setting is read as the file writes it, or the file is
    /// refused. Yams dropped a U+FEFF where a value started, so
    /// `"\u{FEFF}us-east-1"` ran as `us-east-1` while the same value from the
    /// environment was refused. Generated values go into a scalar, a list
    /// item, a map value and a map key, written raw or `\u`-escaped.
    @Test func everyValueIsReadAsWrittenOrTheFileRefused() async {
        let written = Generator<(String, Bool), Shrink.None<(String, Bool)>> { rng in (HostileInput.key(&rng), Bool.random(using: &rng)) }
        await propertyCheck(count: 1500, input: written) { value, escaped in
            await Task.yield()
            let literal = escaped ? Self.escapedEverywhere(value) : HostileInput.jsonString(value)
            let text = """
                {"worker":{"id":\(literal)},"items":{"tables":[\(literal)]},
                 "kafka":{"properties":{"client.id":\(literal),\(literal):"x"}}}
                """
            switch Result(catching: { () throws(ConfigurationError) in try ConfigurationSources(fileText: text, environment: [:]) }) {
            case .failure(let error):
                #expect(!error.description.isEmpty)
            case .success(let sources):
                let what = "\(value.unicodeScalars.map { String($0.value, radix: 16) }) written \(escaped ? "escaped" : "raw")"
                #expect(sources.value(.workerId)?.0 == value, "worker.id: \(what)")
                #expect(sources.list(.tables)?.0 == [value], "items.tables: \(what)")
                guard case .map(let map) = sources.file[.kafkaProperties] else { Issue.record("no map: \(what)"); return }
                #expect(map["client.id"] == value, "a map's value: \(what)")
                #expect(map[value] == "x" || value == "client.id", "a map's key: \(what)")
            }
        }
    }

    /// A mark that starts the file is an editor's byte order mark and is
    /// read past; one anywhere after it is refused with its line.
    @Test func aByteOrderMarkIsTakenOnlyWhereTheFileStarts() throws {
        let leading = try ConfigurationSources(fileText: "\u{FEFF}{\"s3\":{\"region\":\"us-east-1\"}}", environment: [:])
        #expect(leading.value(.region)?.0 == "us-east-1")
        for text in ["{\"s3\":\n{\"region\":\"\u{FEFF}us-east-1\"}}", "{\"s3\":\n{\"region\":\"\\ufeffus-east-1\"}}"] {
            #expect(throws: ConfigurationError.self) { try ConfigurationSources(fileText: text, environment: [:]) }
            do { _ = try ConfigurationSources(fileText: text, environment: [:]) } catch {
                #expect(error.description.contains("line 2 holds U+FEFF"), "\(error)")
            }
        }
    }

    /// `text` as a JSON string with every scalar but ASCII letters and digits `\u`-escaped.
    static func escapedEverywhere(_ text: String) -> String {
        var out = "\""
        for unit in text.utf16 {
            if let scalar = Unicode.Scalar(unit), scalar.properties.isASCIIHexDigit || ("g"..."z").contains(scalar) || ("G"..."Z").contains(scalar) {
                out.unicodeScalars.append(scalar)
            } else {
                out += "\\u" + String(repeating: "0", count: 4 - String(unit, radix: 16).count) + String(unit, radix: 16)
            }
        }
        return out + "\""
    }
}
