/// What a transfer request asks for.
public enum TransferOperation: String, Sendable, Codable, CaseIterable {
    case upload, download, delete, copy
}
