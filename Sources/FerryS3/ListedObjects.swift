import FerryCore
import FerryStorage

extension S3Client {
    /// Every object whose key starts with `prefix`, in key order, one page
    /// (ListObjectsV2) fetched when the caller has taken the previous one: a
    /// prefix of millions of keys holds one page in memory, and the first
    /// objects can be worked on while later pages are still on the server.
    public func objects(bucket: String, prefix: String, pageSize: Int = 1000) -> ListedObjects {
        ListedObjects(client: self, bucket: bucket, prefix: prefix, pageSize: pageSize)
    }

    /// Every object whose key starts with `prefix`, all pages collected.
    public func listObjects(bucket: String, prefix: String) async throws(FerryError) -> [ListedObject] {
        var objects: [ListedObject] = []
        var iterator = self.objects(bucket: bucket, prefix: prefix).makeAsyncIterator()
        while let object = try await iterator.next() { objects.append(object) }
        return objects
    }
}

/// The objects under a prefix, page by page (see `S3Client.objects`). A page
/// that cannot be fetched, or a listing that does not move on (`ListingProgress`),
/// ends the iteration with that error.
public struct ListedObjects: AsyncSequence, Sendable {
    public typealias Element = S3Client.ListedObject
    public typealias Failure = FerryError
    let client: S3Client
    let bucket: String
    let prefix: String
    let pageSize: Int

    public func makeAsyncIterator() -> Iterator {
        Iterator(client: client, bucket: bucket, prefix: prefix, pageSize: pageSize,
                 progress: ListingProgress(operation: "ListObjectsV2 of \(bucket)/\(prefix)"))
    }

    public struct Iterator: AsyncIteratorProtocol, Sendable {
        public typealias Failure = FerryError
        let client: S3Client
        let bucket: String
        let prefix: String
        let pageSize: Int
        var progress: ListingProgress
        var page: [S3Client.ListedObject] = []
        var index = 0
        /// Where the next page starts; nil before the first and after the last.
        var token: String?
        var started = false

        public mutating func next() async throws(FerryError) -> S3Client.ListedObject? {
            while index == page.count {
                if started && token == nil { return nil }
                let listing = try await client.listObjects(bucket: bucket, prefix: prefix, continuation: token, maxKeys: pageSize)
                started = true
                page = listing.items.map { S3Client.ListedObject(key: $0.key, size: $0.size) }
                index = 0
                token = try progress.advance(truncated: listing.next != nil, next: listing.next)
            }
            defer { index += 1 }
            return page[index]
        }
    }
}
