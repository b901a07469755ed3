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
}
