import FerryTestSupport
import Foundation
import Testing

/// `ferry uploads`: incomplete multipart uploads listed and aborted, checked
/// against moto with boto3 (which made them and lists what is left); and the
/// command a `ferry cp` prints when its own abort failed, pasted into bash.
@Suite struct UploadsCommandTests {
    let ferry = TestPaths.ferryBinary

    func boto3(_ moto: MotoServer, _ script: String, _ arguments: [String] = []) async throws -> String {
        try await runChecked("python3", ["-c", "import boto3, sys\ns3 = boto3.client('s3')\n" + script] + arguments,
                             environment: moto.clientEnvironment).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test func listsAndAbortsOnlyWhatIsChosen() async throws {
        let logs = try TestPaths.temporaryDirectory("uploads-moto")
        defer { try? FileManager.default.removeItem(at: logs) }
        try await MotoServer.start(logDirectory: logs).stopAfter { moto in
            let keys = ["raw/one.bin", "raw/two words.bin", "raw/it's $HOME.bin", "other/three.bin"]
            let ids = try await boto3(moto, """
                s3.create_bucket(Bucket='ups')
                for key in sys.argv[1:]: print(s3.create_multipart_upload(Bucket='ups', Key=key)['UploadId'])
                """, keys).split(separator: "\n").map(String.init)
            try #require(ids.count == keys.count)
            let env = moto.clientEnvironment

            // Listed under the prefix: one line each, the object quoted so that bash reads the key back.
            let listed = try await runChecked(ferry, ["uploads", "s3://ups/raw/"], environment: env)
            let lines = listed.split(separator: "\n").map { $0.split(separator: "\t").map(String.init) }
            #expect(Set(lines.map { $0[1] }) == Set(ids.prefix(3)), "\(listed)")
            for fields in lines {
                let uri = try await runChecked("/bin/bash", ["-c", "printf %s \(fields[2])"])
                #expect(keys.map { "s3://ups/\($0)" }.contains(uri), "\(fields[2]) reads back as \(uri)")
            }

            // --abort alone is refused (an upload in progress must not be cut by accident), and so is an unknown id.
            let bare = try await runCommand(ferry, ["uploads", "s3://ups", "--abort"], environment: env)
            #expect(bare.status == 64 && bare.stderr.contains("--abort needs --upload-id"), "\(bare.stderr)")
            let unknown = try await runCommand(ferry, ["uploads", "s3://ups/raw/", "--abort", "--upload-id", "no-such-id"], environment: env)
            #expect(unknown.status == 1 && unknown.stderr.contains("no incomplete upload no-such-id under s3://ups/raw/ (3 there)"),
                    "\(unknown.stderr)")

            // One upload by its id, then everything older than a moment (moto dates every upload in 2010).
            _ = try await runChecked(ferry, ["uploads", "s3://ups/raw/two words.bin", "--abort", "--upload-id", ids[1]], environment: env)
            let left = try await boto3(moto, "print(sorted(u['Key'] for u in s3.list_multipart_uploads(Bucket='ups').get('Uploads', [])))")
            #expect(left == "['other/three.bin', \"raw/it's $HOME.bin\", 'raw/one.bin']", "\(left)")
            let all = try await runCommand(ferry, ["uploads", "s3://ups", "--abort", "--older-than", "60"], environment: env)
            #expect(all.status == 0 && all.stderr.contains("aborted 3 of 3 incomplete uploads under s3://ups"), "\(all.stderr)")
            #expect(try await boto3(moto, "print(len(s3.list_multipart_uploads(Bucket='ups').get('Uploads', [])))") == "0")
        }
    }

    /// A `ferry cp` whose part is refused and whose abort fails as well (a store
    /// that stays full) leaves its upload; its error line names the command that
    /// removes it, and that command, pasted into bash, does.
    @Test func aCopyThatCannotAbortNamesTheCommandThatDoes() async throws {
        let key = "in/big file's.bin"
        let copyEnded = SharedCounter()  // 0 while ferry cp runs
        let deletes = SharedCounter(), abortedLater = SharedCounter()
        let server = try HTTPAnswerer { request in
            let line = request.prefix { $0 != "\r\n" }
            let error = { (status: String, code: String) in
                ("HTTP/1.1 \(status)", HTTPAnswerer.Body.fixed(Array("<Error><Code>\(code)</Code><Message>\(code)</Message></Error>".utf8)))
            }
            switch line.split(separator: " ").first {
            case "HEAD": return ("HTTP/1.1 404 Not Found", .fixed([]))
            case "POST": return ("HTTP/1.1 200 OK", .fixed(Array(("<InitiateMultipartUploadResult><Bucket>full</Bucket><Key>\(key)</Key>"
                                                                  + "<UploadId>up-7</UploadId></InitiateMultipartUploadResult>").utf8)))
            case "PUT": return error("403 Forbidden", "AccessDenied")
            case "DELETE":
                deletes.add()
                if copyEnded.value == 0 { return error("500 Internal Server Error", "InternalError") }
                if line.contains("uploadId=up-7") { abortedLater.add() }
                return ("HTTP/1.1 204 No Content", .fixed([]))
            default:  // GET ?uploads: the listing the command reads first
                return ("HTTP/1.1 200 OK", .fixed(Array(("<ListMultipartUploadsResult><Bucket>full</Bucket><IsTruncated>false</IsTruncated>"
                    + "<Upload><Key>\(key.replacingOccurrences(of: "'", with: "&apos;"))</Key><UploadId>up-7</UploadId>"
                    + "<Initiated>2026-11-29T05:00:00.000Z</Initiated></Upload></ListMultipartUploadsResult>").utf8)))
            }
        }
        let dir = try TestPaths.temporaryDirectory("uploads-hint")
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("big.bin")
        try Data(count: 17 << 20).write(to: file)
        let env = RecursiveCopyTests.credentials.merging(["AWS_ENDPOINT_URL": "http://127.0.0.1:\(server.port)"]) { $1 }
        let copy = try await runCommand(ferry, ["cp", file.path, "s3://full/\(key)", "--quiet"], environment: env)
        copyEnded.add()
        #expect(copy.status == 1, "\(copy.stderr)")
        #expect(deletes.value >= 2, "the abort was sent \(deletes.value) times: it is retried as any request")
        let marker = "until it is aborted: "
        let hint = try #require(copy.stderr.split(separator: "\n").first { $0.contains(marker) }.map {
            String($0[$0.range(of: marker)!.upperBound...])
        }, "\(copy.stderr)")
        #expect(hint.hasPrefix("ferry uploads 's3://full/in/big file'\\''s.bin' --abort --upload-id up-7"), "\(hint)")
        let pasted = try await runCommand("/bin/bash", ["-c", "PATH=\(URL(fileURLWithPath: ferry).deletingLastPathComponent().path):$PATH; \(hint)"],
                                          environment: env)
        #expect(pasted.status == 0 && abortedLater.value == 1, "\(pasted.stdout) \(pasted.stderr)")
    }
}
