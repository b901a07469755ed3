import FerryCore
import FerryStorage
import Foundation
import FerryConcurrency

/// A profile's `credential_process`: a command (run by `/bin/sh -c`, at most
/// 60 s) that prints `{"Version": 1, "AccessKeyId", "SecretAccessKey",
/// "SessionToken", "Expiration"}` as AWS's CLI and SDKs expect.
public enum ProcessCredentialProvider {
    struct Output: Decodable {
        var Version: Int
        var AccessKeyId: String
        var SecretAccessKey: String
        var SessionToken: String?
        var Expiration: String?
    }

    public static func make(command: String, source: String) -> RefreshingCredentialProvider {
        RefreshingCredentialProvider(source: source) { () async throws(FerryError) -> AWSCredentials in
            let data = try await BlockingPool.shared.run { () throws(FerryError) -> Data in try run(command) }
            guard let output = try? JSONDecoder().decode(Output.self, from: data), output.Version == 1 else {
                throw FerryError(.credentialsUnavailable, "credential_process printed no Version 1 credentials JSON")
            }
            return AWSCredentials(accessKeyId: output.AccessKeyId, secretAccessKey: output.SecretAccessKey,
                                  sessionToken: output.SessionToken, expiration: output.Expiration.flatMap(CredentialExpiry.parse))
        }
    }

    /// Runs `command` and returns its standard output; a non-zero exit or a hang is an error.
    static func run(_ command: String) throws(FerryError) -> Data {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", command]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        do { try SpawnLock.holding { try process.run() } } catch { throw FerryError(.credentialsUnavailable, "cannot start credential_process: \(error)") }
        let killer = ProcessThreads.after(seconds: 60) { if process.isRunning { process.terminate() } }
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        killer.cancel()
        guard process.terminationReason == .exit, process.terminationStatus == 0 else {
            throw FerryError(.credentialsUnavailable, "credential_process failed (exit \(process.terminationStatus))")
        }
        return data
    }
}
