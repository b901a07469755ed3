/// A decoding failure in words a person can act on: what is wrong and where
/// (`Records[0].s3.object.key`), rather than the decoder's debug text with
/// its coding-key dumps. One line of at most about 500 bytes: what the
/// document put in (keys, values quoted by the decoder) is shown with its
/// control characters escaped.
public enum DecodingProblem {
    public static func describe(_ error: any Error) -> String {
        TextClip.clipped(TerminalText.visible(words(error)), toUTF8: 500)
    }

    private static func words(_ error: any Error) -> String {
        switch error {
        case let DecodingError.keyNotFound(key, context):
            return "missing required field '\(path(context.codingPath + [key]))'"
        case let DecodingError.typeMismatch(type, context):
            return "wrong type for '\(path(context.codingPath))' (expected \(expected(type)))"
        case let DecodingError.valueNotFound(_, context):
            return "null value for '\(path(context.codingPath))'"
        case let DecodingError.dataCorrupted(context) where context.codingPath.isEmpty:
            return context.underlyingError == nil ? context.debugDescription : "not valid JSON"
        case let DecodingError.dataCorrupted(context):
            return "invalid value for '\(path(context.codingPath))': \(TextClip.clipped(context.debugDescription, toUTF8: 200))"
        default:
            return "\(error)"
        }
    }

    /// `Records[0].eventName`: fields joined by dots, array positions in
    /// brackets. Not escaped: the caller decides how it is shown.
    public static func path(_ codingPath: [any CodingKey]) -> String {
        var text = ""
        for key in codingPath {
            if let index = key.intValue, key.stringValue.hasPrefix("Index ") || key.stringValue == "\(index)" {
                text += "[\(index)]"
            } else {
                text += text.isEmpty ? key.stringValue : "." + key.stringValue
            }
        }
        return text.isEmpty ? "(the document)" : text
    }

    private static func expected(_ type: Any.Type) -> String {
        switch type {
        case is String.Type: return "a string"
        case is Bool.Type: return "true or false"
        case is Int.Type, is Int64.Type, is Int32.Type, is UInt64.Type, is UInt32.Type, is UInt8.Type: return "an integer"
        case is Double.Type, is Float.Type: return "a number"
        default:
            let name = "\(type)"
            if name.hasPrefix("Array") { return "an array" }
            if name.hasPrefix("Dictionary") { return "an object" }
            return name
        }
    }
}
