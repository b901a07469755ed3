import FerryCore
import Foundation

/// Lambda's event filtering: `{"Filters":[{"Pattern":"<JSON>"}]}`. A record
/// reaches the handler when it matches one of the patterns (none: all pass).
/// A pattern mirrors the record's JSON; its leaves are lists of matchers, any
/// of which may match: a literal (equals), `prefix`, `suffix`,
/// `equals-ignore-case`, `anything-but` (values, or `{"prefix"}`), `numeric`
/// (`[">", 0, "<=", 5]`; DynamoDB's string numbers count) and `exists`.
public struct FilterCriteria: Sendable {
    public private(set) var patterns: [FilterPattern]
    /// The patterns as written, for `ferry triggers list`.
    public private(set) var sources: [String]

    public init() { patterns = []; sources = [] }

    /// Parses each pattern; a malformed one is an error naming it.
    public init(patterns: [String]) throws(TriggerRegistrationError) {
        self.sources = patterns
        var parsed: [FilterPattern] = []
        for text in patterns {
            // A field given twice would leave which matcher counts to the reader.
            if let problem = StrictJSON.check(Array(text.utf8)) {
                throw TriggerRegistrationError(problem.refusing("filter pattern \(text)"))
            }
            guard let object = try? FoundationJSON.object(Array(text.utf8)) as? [String: Any] else {
                throw TriggerRegistrationError("filter pattern is not a JSON object: \(text)")
            }
            parsed.append(try FilterPattern.parse(object, path: ""))
        }
        self.patterns = parsed
    }

    public var isEmpty: Bool { patterns.isEmpty }

    public func matches(_ record: DynamoDBEvent.Record) -> Bool {
        guard !patterns.isEmpty else { return true }
        guard let data = try? FerryJSON.encode(record),
              let json = try? FoundationJSON.object(data) else { return false }
        return matches(json: json)
    }

    /// Whether a record's JSON, as `FoundationJSON` reads it, matches.
    public func matches(json: Any) -> Bool {
        patterns.isEmpty || patterns.contains { $0.matches(json) }
    }
}

/// One parsed pattern.
public indirect enum FilterPattern: Sendable {
    case fields([String: FilterPattern])
    case anyOf([Matcher])

    public enum Scalar: Sendable, Hashable {
        case string(String), number(Double), bool(Bool), null
    }

    public enum Matcher: Sendable {
        case equals(Scalar)
        case prefix(String)
        case suffix(String)
        case equalsIgnoreCase(String)
        case anythingBut([Scalar])
        case anythingButPrefix(String)
        case numeric([(String, Double)])
        case exists(Bool)
    }

    static func parse(_ object: [String: Any], path: String) throws(TriggerRegistrationError) -> FilterPattern {
        var fields: [String: FilterPattern] = [:]
        for (key, value) in object {
            let here = path.isEmpty ? key : "\(path).\(key)"
            if let nested = value as? [String: Any] {
                fields[key] = try parse(nested, path: here)
            } else if let list = value as? [Any] {
                var matchers: [Matcher] = []
                for item in list { matchers.append(try matcher(item, path: here)) }
                fields[key] = .anyOf(matchers)
            } else {
                throw TriggerRegistrationError("filter pattern: '\(here)' must be an object or a list of matchers")
            }
        }
        return .fields(fields)
    }

    static func scalar(_ any: Any) -> Scalar? {
        switch any {
        case is NSNull: return .null
        // JSON's true/false arrive as NSNumber too; their type code is "c".
        case let number as NSNumber where String(cString: number.objCType) == "c": return .bool(number.boolValue)
        case let number as NSNumber: return .number(number.doubleValue)
        case let string as String: return .string(string)
        default: return nil
        }
    }

    static func matcher(_ item: Any, path: String) throws(TriggerRegistrationError) -> Matcher {
        if let value = scalar(item) { return .equals(value) }
        guard let rule = item as? [String: Any], rule.count == 1, let (name, argument) = rule.first else {
            throw TriggerRegistrationError("filter pattern: '\(path)' has a matcher that is neither a value nor a one-key rule")
        }
        switch (name, argument) {
        case ("prefix", let s as String): return .prefix(s)
        case ("suffix", let s as String): return .suffix(s)
        case ("equals-ignore-case", let s as String): return .equalsIgnoreCase(s)
        case ("exists", let b as NSNumber) where String(cString: b.objCType) == "c": return .exists(b.boolValue)
        case ("anything-but", let nested as [String: Any]):
            if let p = nested["prefix"] as? String, nested.count == 1 { return .anythingButPrefix(p) }
        case ("anything-but", let list as [Any]):
            let values = list.compactMap(scalar)
            if values.count == list.count { return .anythingBut(values) }
        case ("anything-but", let single):
            if let value = scalar(single) { return .anythingBut([value]) }
        case ("numeric", let list as [Any]):
            var comparisons: [(String, Double)] = []
            var i = 0
            while i + 1 < list.count, let op = list[i] as? String, [">", ">=", "<", "<=", "="].contains(op),
                  let number = list[i + 1] as? NSNumber {
                comparisons.append((op, number.doubleValue))
                i += 2
            }
            if i == list.count, !comparisons.isEmpty { return .numeric(comparisons) }
        default: break
        }
        throw TriggerRegistrationError("filter pattern: '\(path)' has an unknown or malformed rule '\(name)'")
    }

    /// Whether `json` (the record, or a part of it) matches.
    func matches(_ json: Any?) -> Bool {
        switch self {
        case .fields(let fields):
            let object = json as? [String: Any]
            return fields.allSatisfy { key, pattern in pattern.matches(object?[key]) }
        case .anyOf(let matchers):
            return matchers.contains { Self.test($0, json) }
        }
    }

    private static func test(_ matcher: Matcher, _ value: Any?) -> Bool {
        if case .exists(let wanted) = matcher { return (value != nil) == wanted }
        guard let value else { return false }
        // A list in the data matches when one of its elements does.
        if let list = value as? [Any] { return list.contains { test(matcher, $0) } }
        let actual = scalar(value)
        switch matcher {
        case .equals(let expected): return actual == expected
        case .prefix(let p): if case .string(let s)? = actual { return s.hasPrefix(p) }; return false
        case .suffix(let p): if case .string(let s)? = actual { return s.hasSuffix(p) }; return false
        case .equalsIgnoreCase(let p): if case .string(let s)? = actual { return s.lowercased() == p.lowercased() }; return false
        case .anythingBut(let values): return actual.map { !values.contains($0) } ?? false
        case .anythingButPrefix(let p): if case .string(let s)? = actual { return !s.hasPrefix(p) }; return false
        case .numeric(let comparisons):
            let number: Double?
            switch actual {
            case .number(let n)?: number = n
            case .string(let s)?: number = Double(s)  // DynamoDB writes numbers as strings
            default: number = nil
            }
            guard let number else { return false }
            return comparisons.allSatisfy { op, bound in
                switch op {
                case ">": return number > bound
                case ">=": return number >= bound
                case "<": return number < bound
                case "<=": return number <= bound
                default: return number == bound
                }
            }
        case .exists: return true
        }
    }
}
