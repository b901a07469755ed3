/// A word as bash reads it back unchanged, for commands Ferry prints to be
/// pasted (a key may hold spaces, quotes, `$`, newlines): bare when every
/// character is one no shell treats specially, in single quotes otherwise
/// (a quote inside becomes `'\''`), and as `$'…'` with `\xHH` escapes when it
/// holds characters `TerminalText` would not print (control characters,
/// bidirectional overrides), so a printed line stays one line and shows what it is.
public enum ShellWord {
    public static func quoted(_ word: String) -> String {
        let scalars = word.unicodeScalars
        if !scalars.isEmpty, scalars.allSatisfy(isPlain) { return word }
        guard scalars.contains(where: TerminalText.isUnsafe) else {
            var out = "'"
            for scalar in scalars { if scalar == "'" { out += "'\\''" } else { out.unicodeScalars.append(scalar) } }
            return out + "'"
        }
        var out = "$'"
        for scalar in scalars {
            if TerminalText.isUnsafe(scalar) {
                for byte in String(scalar).utf8 { out += "\\x" + hexDigit(byte >> 4) + hexDigit(byte & 0xF) }
            } else {
                if scalar == "'" || scalar == "\\" { out += "\\" }
                out.unicodeScalars.append(scalar)
            }
        }
        return out + "'"
    }

    private static func isPlain(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar {
        case "a"..."z", "A"..."Z", "0"..."9", "-", "_", ".", "/", ":", "@", "%", "+", ",", "=": true
        default: false
        }
    }

    private static func hexDigit(_ nibble: UInt8) -> String { String(Array("0123456789abcdef")[Int(nibble)]) }
}
