import ArgumentParser
import FerryCore
import FerryS3
import FerryStorage
import Foundation

struct PresignCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "presign",
        abstract: "Print a presigned URL (SigV4 query signing) for a GET or PUT of one object.",
        discussion: """
            Anyone holding the URL can perform that one operation until it expires (at most 7 days).
            Examples:
              ferry presign get s3://photos/public/cat.jpg --expires 3600
              curl -fo cat.jpg "$(ferry presign get s3://photos/public/cat.jpg)"
              curl -fT cat.jpg -H 'Content-Type: image/jpeg' "$(ferry presign put s3://photos/public/cat.jpg --content-type image/jpeg)"
            """)

    @Argument(help: "get or put.") var method: String
    @Argument(help: "s3://bucket/key") var object: String
    @Option(help: "Seconds until the URL expires (1…604800, default 3600).") var expires = 3600
    @Option(name: .customLong("content-type"), help: "PUT only: the Content-Type the uploader must send.") var contentType: String?
    @OptionGroup var s3: S3Options

    func run() async throws {
        guard ["get", "put"].contains(method.lowercased()) else { throw ValidationError("method must be get or put") }
        guard (1...604_800).contains(expires) else { throw ValidationError("--expires must be 1…604800 seconds (7 days)") }
        if contentType != nil && method.lowercased() != "put" { throw ValidationError("--content-type applies to put only") }
        let location: ObjectLocation
        do { location = try ObjectLocation(s3URI: object) } catch { throw ValidationError(error.message) }
        let client = try configured { try s3.client() }
        let headers = contentType.map { [("content-type", $0)] } ?? []
        do {
            print(try await client.presignedURL(method: method.uppercased(), location: location, expires: expires, headers: headers))
        } catch {
            throw ValidationError(error.message)
        }
    }
}
