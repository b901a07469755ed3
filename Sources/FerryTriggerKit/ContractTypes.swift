import FerryCore

// The contracts a handler reads and writes, named here so that a handler
// imports the kit alone: the kit does not re-export FerryCore, whose other
// declarations are the runtime's business.

/// An S3 event notification (`Records`), as S3 sends it to Lambda.
public typealias S3Event = FerryCore.S3Event
/// A batch of stream records, as DynamoDB Streams hands it to Lambda.
public typealias DynamoDBEvent = FerryCore.DynamoDBEvent
/// A stream record's attribute, in DynamoDB's typed JSON (`{"S": "…"}`).
public typealias AttributeValue = FerryCore.AttributeValue
/// What a stream record carries: keys only, the new or old image, or both.
public typealias StreamViewType = FerryCore.StreamViewType
/// A stream handler's answer: the records to retry (`batchItemFailures`).
public typealias StreamBatchResponse = FerryCore.StreamBatchResponse
/// A transfer request, as producers enqueue it (`TriggerTransfers.enqueue`).
public typealias TransferRequest = FerryCore.TransferRequest
/// `guest` (`public/`), `protected` or `private`, as in Amplify Storage.
public typealias AccessLevel = FerryCore.AccessLevel
/// Maps a request's key to its S3 key (the access-level prefix).
public typealias PrefixResolver = FerryCore.PrefixResolver
/// Amplify's layout: `public/`, `protected/{id}/`, `private/{id}/`.
public typealias DefaultPrefixResolver = FerryCore.DefaultPrefixResolver
/// What a resolver is asked about a request: operation, level, caller, bucket, key.
public typealias AccessContext = FerryCore.AccessContext
/// The level and owner a full key belongs to.
public typealias ObjectArea = FerryCore.ObjectArea
/// An error with one of S3's codes (`FerryError(.accessDenied, "…")`).
public typealias FerryError = FerryCore.FerryError
/// Ferry's JSON encoding: the bytes Ferry itself writes for the same value.
public typealias FerryJSON = FerryCore.FerryJSON
