/// Text from elsewhere (a server's error message, a peer's reason) cut to a
/// size that can travel on in statuses, logs and failure records.
public enum TextClip {
    /// At most `limit` bytes of `text`, cut at a character, saying so when cut.
    public static func clipped(_ text: String, toUTF8 limit: Int) -> String {
        guard text.utf8.count > limit else { return text }
        var end = text.startIndex
        var bytes = 0
        for index in text.indices {
            let next = bytes + text[index].utf8.count
            if next > limit { break }
            bytes = next
            end = text.index(after: index)
        }
        return "\(text[..<end])… (\(text.utf8.count - bytes) more bytes)"
    }
}
