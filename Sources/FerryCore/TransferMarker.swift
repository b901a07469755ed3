/// User-metadata keys (`x-amz-meta-…`) a worker writes on every object it
/// uploads. They make a redelivered request recognisable: an object that
/// already carries its transfer id is not uploaded again, and the event
/// re-emitted for it keeps the sequencer of the first write.
public enum TransferMarker {
    public static let transferId = "ferry-transfer-id"
    public static let sequencer = "ferry-sequencer"
}
