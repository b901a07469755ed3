import FerryCore
import FerryStorage

/// A paginated listing must move on: a truncated page names where the next
/// one begins, and never a place the listing has already been. A server that
/// breaks this (a repeated continuation token, a truncated page naming no
/// token) would otherwise keep a listing going for ever, growing, or end it
/// early in silence (for the reconciler: keys not listed look deleted).
public struct ListingProgress: Sendable {
    let operation: String
    private var seen: Set<String> = []

    public init(operation: String) { self.operation = operation }

    /// Where the next page starts, or nil when `truncated` is false (the end).
    public mutating func advance(truncated: Bool, next: String?) throws(FerryError) -> String? {
        guard truncated else { return nil }
        guard let next, !next.isEmpty else {
            throw FerryError(.storageError, "\(operation): the server said the page was truncated but named no place to continue from")
        }
        guard seen.insert(next).inserted else {
            throw FerryError(.storageError, "\(operation): the server named a place already listed (\(next.prefix(120))); "
                + "the listing would never end")
        }
        return next
    }
}
