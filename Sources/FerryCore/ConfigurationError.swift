/// A setting that cannot work, found before anything runs: the command line
/// prints it and exits non-zero.
public struct ConfigurationError: Error, Sendable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}
