import Foundation

/// Spellings of one path below a data root (`data`), for properties of the
/// checks that confine local files: what a request could write for a path
/// that means the same file.
public enum PathSpelling {
    /// `components` spelled one of many ways that mean the same path.
    public static func spell(_ components: [String], using rng: inout some RandomNumberGenerator) -> String {
        var parts = components
        switch Int.random(in: 0..<9, using: &rng) {
        case 0, 1: break  // plain
        case 2: parts.insert(".", at: Int.random(in: 0...parts.count, using: &rng))
        case 3:
            // A detour through another area, climbed out of with `..`.
            let detour = [["public"], ["private", "bob"], ["protected", "alice"], ["private", "alice", "x"]].randomElement(using: &rng)!
            parts = detour + Array(repeating: "..", count: detour.count) + parts
        case 4:
            // Out of the root and back in by its own name.
            return "../" + "data/" + parts.joined(separator: "/")
        case 5: return parts.joined(separator: "//")
        case 6:
            // Percent-encoded dots and slashes.
            return parts.joined(separator: "%2F").replacingOccurrences(of: ".", with: "%2e")
        case 7:
            guard !parts.isEmpty else { break }
            let at = Int.random(in: 0..<parts.count, using: &rng)
            parts[at] = parts[at].map { "%" + String(format: "%02X", Int($0.asciiValue ?? 0x78)) }.joined()
        default: parts.append(".")
        }
        return parts.joined(separator: "/")
    }
}
