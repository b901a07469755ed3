/// A message on `<prefix>.control`: every worker reads all of them and applies
/// those naming a transfer it runs.
public struct ControlMessage: Sendable, Codable, Hashable {
    public enum Action: String, Sendable, Codable, CaseIterable { case pause, resume, cancel }
    public var id: String
    public var action: Action
    public init(id: String, action: Action) { self.id = id; self.action = action }
}
