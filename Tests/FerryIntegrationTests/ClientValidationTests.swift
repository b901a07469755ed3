@testable import FerryClient
import FerryCore
import Foundation
import Testing

/// FerryClient refuses what a worker would refuse, with the worker's code,
/// and never traps, whatever the request holds.
@Suite struct ClientValidationTests {
    @Test(arguments: [Double.nan, .infinity, -.infinity, 1e21, 0])
    func nonFiniteAndOutOfRangeNumbersThrow(timeout: Double) {
        let request = TransferRequest.delete(bucket: "photos", key: "k")
        var bad = request
        bad.options = TransferOptions(timeoutSeconds: timeout)
        do {
            _ = try TransferClient.encoded(bad)
            Issue.record("encoded a request with timeoutSeconds \(timeout)")
        } catch {
            // `encoded` throws TransferClientError only (typed throws).
            guard case .invalidRequest(let reason) = error else { Issue.record("\(error)"); return }
            #expect(reason.code == .invalidRequest)
        }
        #expect((try? TransferClient.encoded(request)) != nil)
    }

    @Test func keysAndHeadersAreCheckedBeforeSending() {
        for request in [TransferRequest.delete(bucket: "photos", key: "../private/alice/x"),
                        TransferRequest.upload(from: "data:,x", to: "photos", key: "k", metadata: ["note": "a\r\nb: c"]),
                        TransferRequest.upload(from: "data:;base64,====", to: "photos", key: "k"),
                        TransferRequest.delete(bucket: "Photos", key: "k")] {
            #expect(throws: TransferClientError.self) { _ = try TransferClient.encoded(request) }
        }
    }
}
