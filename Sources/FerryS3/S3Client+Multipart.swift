import FerryCore
import FerryStorage
import Foundation
import FerryConcurrency

extension S3Client {
    public func createMultipartUpload(_ input: PutObjectInput) async throws(FerryError) -> String {
        var headers = try Self.objectHeaders(input)
        if let algorithm = input.checksum {
            headers.append(("x-amz-checksum-algorithm", algorithm.rawValue))
            // A CRC of the whole object, not of the parts' CRCs: a download can check it.
            if algorithm.polynomial != nil { headers.append(("x-amz-checksum-type", "FULL_OBJECT")) }
        }
        let response = try await send("CreateMultipartUpload", method: "POST", bucket: input.bucket, key: input.key,
                                      query: [("uploads", "")], headers: headers, body: .bytes([]))
        guard let uploadId = XMLFields.parse(response.body, wanted: ["UploadId"])["UploadId"], !uploadId.isEmpty else {
            throw FerryError(.storageError, "CreateMultipartUpload answered without an UploadId")
        }
        return uploadId
    }

    public func uploadPart(_ location: ObjectLocation, uploadId: String, partNumber: Int, body: ObjectBody,
                           checksum: ChecksumAlgorithm?, headers extra: [String: String], progress: TransferMeter?) async throws(FerryError) -> CompletedPart {
        // Only SSE-C headers apply to a part; the others were given to CreateMultipartUpload.
        var headers = Self.customerKeyHeaders(extra)
        var value: String?
        var payloadHash = SigV4Signer.unsignedPayload
        if let checksum {
            value = try await BlockingPool.shared.run { () throws(FerryError) -> String in
                var hasher = checksum.makeHasher()
                try body.read { hasher.update($0) }
                return hasher.finish()
            }
            headers.append((checksum.headerName, value!))
            headers.append(("x-amz-sdk-checksum-algorithm", checksum.rawValue))
        } else if case .bytes(let bytes) = body {
            payloadHash = Digest.sha256(bytes).hexString
        }
        let response = try await send("UploadPart", method: "PUT", bucket: location.bucket, key: location.key,
                                      query: [("partNumber", String(partNumber)), ("uploadId", uploadId)],
                                      headers: headers, body: body.httpBody, payloadHash: payloadHash, progress: progress)
        guard let eTag = response.header("etag") else {
            throw FerryError(.storageError, "UploadPart \(partNumber) answered without an ETag")
        }
        return CompletedPart(partNumber: partNumber, eTag: eTag, size: body.length, checksum: value,
                             checksumAlgorithm: value == nil ? nil : checksum)
    }

    public static let copySourceIfMatch = CopyObjectInput.sourceIfMatchHeader

    public func uploadPartCopy(_ location: ObjectLocation, uploadId: String, partNumber: Int, source: ObjectLocation,
                               range: ClosedRange<Int64>, headers extra: [String: String]) async throws(FerryError) -> CompletedPart {
        let copySource = try Self.copySourceHeader(source)
        var headers = [("x-amz-copy-source", copySource), ("x-amz-copy-source-range", "bytes=\(range.lowerBound)-\(range.upperBound)")]
        // SSE-C: the destination's key and the source's.
        headers += Self.customerKeyHeaders(extra)
        headers += Self.copySourceKeyHeaders(extra)
        // Only while the source is the version the copy began with (S3 answers 412 otherwise).
        if let eTag = extra.first(where: { $0.key.lowercased() == Self.copySourceIfMatch })?.value {
            headers.append((Self.copySourceIfMatch, eTag))
        }
        let response = try await send("UploadPartCopy", method: "PUT", bucket: location.bucket, key: location.key,
                                      query: [("partNumber", String(partNumber)), ("uploadId", uploadId)],
                                      headers: headers, body: .bytes([]))
        guard let eTag = try Self.resultETag(response, operation: "UploadPartCopy") else {
            throw FerryError(.storageError, "UploadPartCopy \(partNumber) answered without an ETag")
        }
        return CompletedPart(partNumber: partNumber, eTag: eTag, size: range.upperBound - range.lowerBound + 1)
    }

    public func completeMultipartUpload(_ location: ObjectLocation, uploadId: String, parts: [CompletedPart],
                                        headers: [String: String], wholeChecksum: WholeObjectChecksum?) async throws(FerryError) -> ObjectWriteResult {
        var xml = "<CompleteMultipartUpload xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
        for part in parts.sorted(by: { $0.partNumber < $1.partNumber }) {
            xml += "<Part><PartNumber>\(part.partNumber)</PartNumber><ETag>\(Self.xmlEscaped(part.eTag))</ETag>"
            if let checksum = part.checksum, let element = part.checksumAlgorithm?.xmlElement {
                xml += "<\(element)>\(checksum)</\(element)>"
            }
            xml += "</Part>"
        }
        xml += "</CompleteMultipartUpload>"
        // The SSE-C key goes on the completion too: S3 wants it there when the parts carry
        // checksums (Ferry's do), and uses it for the read-back HEAD below.
        var sent = [("content-type", "application/xml")] + Self.customerKeyHeaders(headers)
        if let wholeChecksum {
            sent += [(wholeChecksum.algorithm.headerName, wholeChecksum.value), ("x-amz-checksum-type", "FULL_OBJECT")]
        }
        let response = try await send("CompleteMultipartUpload", method: "POST", bucket: location.bucket, key: location.key,
                                      query: [("uploadId", uploadId)], headers: sent, body: .bytes(Array(xml.utf8)))
        var result = writeResult(response)
        result.eTag = try Self.resultETag(response, operation: "CompleteMultipartUpload") ?? result.eTag
        if result.eTag == nil || result.eTag == "\"\"" {
            // Ceph RGW 16 answers <ETag></ETag> here: read the object's ETag back. It must
            // be these parts' (a proxy's page of HTML in a 200 completed nothing; the
            // object there is an older one).
            let stored = try await headObject(bucket: location.bucket, key: location.key, headers: headers)?.eTag
            if let expected = MultipartETag.of(parts), stored != expected {
                throw FerryError(.storageError, "CompleteMultipartUpload of \(location.bucket)/\(location.key) answered HTTP "
                    + "\(response.status) without the object's ETag, and the object there is \(stored.map { "ETag \(TextClip.clipped($0, toUTF8: 128))" } ?? "absent"), "
                    + "not these parts' \(expected)")
            }
            result.eTag = stored
        }
        return result
    }

    public func abortMultipartUpload(_ location: ObjectLocation, uploadId: String) async throws(FerryError) {
        do {
            _ = try await send("AbortMultipartUpload", method: "DELETE", bucket: location.bucket, key: location.key,
                               query: [("uploadId", uploadId)])
        } catch where error.message.contains("NoSuchUpload") {
            return  // already gone: the goal is reached
        }
    }

    public func listParts(_ location: ObjectLocation, uploadId: String) async throws(FerryError) -> [CompletedPart] {
        var parts: [CompletedPart] = []
        var marker = "0"
        var progress = ListingProgress(operation: "ListParts of \(location.bucket)/\(location.key) (upload \(uploadId))")
        while true {
            let response = try await send("ListParts", method: "GET", bucket: location.bucket, key: location.key,
                                          query: [("max-parts", "1000"), ("part-number-marker", marker), ("uploadId", uploadId)])
            let document = try S3Document.expect(response, root: "ListPartsResult", alsoAccepted: ["ListPartsResponse"], record: "Part",
                                                 wanted: ["IsTruncated", "NextPartNumberMarker"], operation: "ListParts of \(location.bucket)/\(location.key)")
            for record in document.records {
                guard let number = record["PartNumber"].flatMap(Int.init), let eTag = record["ETag"] else { continue }
                let algorithm = ChecksumAlgorithm.allCases.first { record[$0.xmlElement] != nil }
                parts.append(CompletedPart(partNumber: number, eTag: Self.quotedETag(eTag),
                                           size: Int64(record["Size"] ?? "") ?? 0,
                                           checksum: algorithm.flatMap { record[$0.xmlElement] }, checksumAlgorithm: algorithm))
            }
            let fields = document.fields
            guard let next = try progress.advance(truncated: fields["IsTruncated"] == "true", next: fields["NextPartNumberMarker"]) else { break }
            marker = next
        }
        return parts
    }

    public func listMultipartUploads(bucket: String, prefix: String) async throws(FerryError) -> [MultipartUploadSummary] {
        var uploads: [MultipartUploadSummary] = []
        var keyMarker = "", uploadIdMarker = ""
        var progress = ListingProgress(operation: "ListMultipartUploads of \(bucket)/\(prefix)")
        while true {
            var query: [(String, String)] = [("uploads", ""), ("prefix", prefix)]
            if !keyMarker.isEmpty { query += [("key-marker", keyMarker), ("upload-id-marker", uploadIdMarker)] }
            let response = try await send("ListMultipartUploads", method: "GET", bucket: bucket, key: nil, query: query)
            let document = try S3Document.expect(response, root: "ListMultipartUploadsResult", record: "Upload",
                                                 wanted: ["IsTruncated", "NextKeyMarker", "NextUploadIdMarker"],
                                                 operation: "ListMultipartUploads of \(bucket)/\(prefix)")
            for record in document.records {
                guard let key = record["Key"], let id = record["UploadId"] else { continue }
                let initiated = record["Initiated"].flatMap(Timestamp.parseInternetDateTime)
                uploads.append(MultipartUploadSummary(key: key, uploadId: id, initiated: initiated))
            }
            let fields = document.fields
            let uploadMarker = fields["NextUploadIdMarker"] ?? ""
            // The two markers together name where the next page starts.
            let next = fields["NextKeyMarker"].map { "\($0)\u{0}\(uploadMarker)" }
            guard try progress.advance(truncated: fields["IsTruncated"] == "true", next: next) != nil, let nextKey = fields["NextKeyMarker"] else { break }
            keyMarker = nextKey
            uploadIdMarker = uploadMarker
        }
        return uploads
    }

    static func xmlEscaped(_ s: String) -> String {
        s.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "\"", with: "&quot;")
            .replacingOccurrences(of: "<", with: "&lt;").replacingOccurrences(of: ">", with: "&gt;")
    }
}
