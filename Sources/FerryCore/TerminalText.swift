/// Text that others wrote (statuses on the status topic, which any producer
/// with access can write; a store's error message), made safe to print.
/// Control characters (C0, DEL, C1) and bidirectional overrides would let
/// whoever wrote it move the cursor, clear the screen, retitle the terminal,
/// fake lines or reorder what is shown; they are printed as `\u{…}` instead.
public enum TerminalText {
    public static func visible(_ text: String) -> String {
        escapingUnsafe(text) { "\\u{\(String($0.value, radix: 16, uppercase: true))}" }
    }

    /// JSON text with the same characters written as JSON escapes (`\u009b`):
    /// JSON encoders escape C0 but may leave DEL, C1 and bidirectional
    /// overrides as they are; escaped, the text still parses to the same value.
    public static func visibleJSON(_ json: String) -> String {
        escapingUnsafe(json) { scalar in
            let hex = String(scalar.value, radix: 16)
            return "\\u" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
        }
    }

    private static func escapingUnsafe(_ text: String, _ escape: (Unicode.Scalar) -> String) -> String {
        guard text.unicodeScalars.contains(where: isUnsafe) else { return text }
        // Bytes, not a growing `String.UnicodeScalarView`: appending to the
        // view copied it each time, and a 400,000-character refused value
        // took `ferry config check` minutes to print.
        var shown: [UInt8] = []
        shown.reserveCapacity(text.utf8.count + 64)
        for scalar in text.unicodeScalars {
            if isUnsafe(scalar) { shown.append(contentsOf: escape(scalar).utf8) } else { UTF8.encode(scalar) { shown.append($0) } }
        }
        return String(decoding: shown, as: UTF8.self)
    }

    public static func isUnsafe(_ scalar: Unicode.Scalar) -> Bool {
        scalar.properties.generalCategory == .control
            || (0x202A...0x202E).contains(scalar.value) || (0x2066...0x2069).contains(scalar.value)
            || scalar.value == 0x200E || scalar.value == 0x200F
    }
}
