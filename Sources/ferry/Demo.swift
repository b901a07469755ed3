import FerryClient
import FerryCore
import FerryEngine
import Foundation
import Logging

/// The `ferry dev --demo` walkthrough: everything goes through Kafka, exactly
/// as a producer would use Ferry.
struct Demo {
    let bootstrapServers: String
    let dataRoot: DataRoot
    let logger: Logger

    let bucket = "demo"

    /// Returns whether every step did what it should.
    func run() async throws -> Bool {
        let root = URL(fileURLWithPath: dataRoot.path)
        let inbox = root.appendingPathComponent("demo/in")
        try FileManager.default.createDirectory(at: inbox, withIntermediateDirectories: true)
        let auditFile = root.appendingPathComponent("audit/audit.jsonl")
        let auditLinesBefore = Self.lines(auditFile).count

        let files: [(String, Data)] = [
            ("hello.txt", Data("Hello from Ferry.\n".utf8)),
            ("report.json", Data(#"{"rows": 3, "ok": true}"#.utf8)),
            ("photo.bin", Data((0..<(3 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) })),
        ]
        for (name, bytes) in files { try bytes.write(to: inbox.appendingPathComponent(name)) }

        let client = try TransferClient(bootstrapServers: bootstrapServers, logger: logger)
        print("\n== Uploading \(files.count) files through Kafka (topic ferry.requests) ==")
        var ok = true
        for (name, _) in files {
            let request = TransferRequest(id: "demo-up-\(name)-\(UUID().uuidString.prefix(8))", op: .upload, bucket: bucket,
                                          key: "photos/\(name)", source: inbox.appendingPathComponent(name).absoluteString)
            ok = try await follow(request, client: client) && ok
        }

        print("\n== Downloading photos/photo.bin back ==")
        let target = root.appendingPathComponent("demo/out/photo.bin")
        try? FileManager.default.removeItem(at: target)
        let download = TransferRequest(id: "demo-down-\(UUID().uuidString.prefix(8))", op: .download, bucket: bucket,
                                       key: "photos/photo.bin", destination: target.absoluteString)
        ok = try await follow(download, client: client) && ok
        let same = FileManager.default.contentsEqual(atPath: target.path, andPath: inbox.appendingPathComponent("photo.bin").path)
        print(same ? "download verified: \(target.path) is byte-identical to the upload"
                   : "DOWNLOAD MISMATCH: \(target.path) differs from the upload")
        ok = ok && same

        print("\n== Trigger output (audit-log handler, \(auditFile.path)) ==")
        let deadline = Date().addingTimeInterval(60)
        var newLines: [String] = []
        while Date() < deadline {
            newLines = Array(Self.lines(auditFile).dropFirst(auditLinesBefore))
            if newLines.count >= files.count { break }
            try await Task.sleep(for: .milliseconds(200))
        }
        newLines.forEach { print($0) }
        if newLines.count < files.count {
            print("expected \(files.count) trigger lines, saw \(newLines.count)")
            ok = false
        }
        print(ok ? "\nDemo finished: all transfers completed and the trigger ran." : "\nDemo FAILED (see above).")
        return ok
    }

    private func follow(_ request: TransferRequest, client: TransferClient) async throws -> Bool {
        let display = ProgressDisplay(label: request.key)
        for await status in try await client.enqueueAndFollow(request) {
            display.show(status)
            if status.state.isTerminal { return status.state == .completed }
        }
        return false
    }

    static func lines(_ file: URL) -> [String] {
        guard let text = try? String(contentsOf: file, encoding: .utf8) else { return [] }
        return text.split(separator: "\n").map(String.init)
    }
}
