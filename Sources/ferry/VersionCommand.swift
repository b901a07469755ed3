import ArgumentParser
import FerryKafka
import FerryS3
import FerryStorage
import FerryStore

struct VersionCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "version",
        abstract: "Print Ferry's version and the versions of the C libraries it runs on.",
        discussion: "Example:\n  ferry version")

    func run() {
        print("ferry \(FerryVersion.current)")
        print("librdkafka \(librdkafkaVersion)")
        print(CurlTransport.libcurlVersion)
        print("SQLite \(WorkerStateStore.sqliteVersion)")
    }
}
