import Foundation

/// Either kind of message on `<prefix>.requests`.
public enum WorkerRequest: Sendable {
    case transfer(TransferRequest)
    case item(ItemRequest)
}

extension RequestDecoder {
    /// Decodes a transfer or an item request; never traps on any input.
    /// The JSON is parsed once, whichever kind the message is.
    public static func decodeAny(_ bytes: [UInt8]) -> Result<WorkerRequest, Failure> {
        if let tooLarge = sizeFailure(bytes) { return .failure(tooLarge) }
        if let unclear = strictnessFailure(bytes) { return .failure(unclear) }
        let data = Data(bytes)
        let loose = looseObject(bytes)
        guard let loose, let op = loose["op"] as? String, let itemOp = ItemOperation(rawValue: op) else {
            return decodeTransfer(data, loose: loose).map(WorkerRequest.transfer)
        }
        let id = loose["id"] as? String
        do throws(FerryError) {
            return .success(.item(try ItemRequestDecoder.decode(loose, text: bytes, op: itemOp)))
        } catch {
            return .failure(Failure(error: error, id: id.flatMap(isValidId) == true ? id : nil, op: op))
        }
    }
}

/// The rules of item requests (docs/producers/records.md): the same
/// envelope rules as transfers, a table name, plain-JSON attributes, and
/// `S3ObjectInput`s that pass the upload rules.
enum ItemRequestDecoder {
    /// `json` is `text` as `JSONSerialization` reads it; attributes are read
    /// from `text` itself (`ItemJSONText`), so numbers keep every digit.
    static func decode(_ json: [String: Any], text: [UInt8], op: ItemOperation) throws(FerryError) -> ItemRequest {
        let members = StrictJSON.members(of: text) ?? []
        func string(_ name: String) throws(FerryError) -> String? {
            guard let value = json[name], !(value is NSNull) else { return nil }
            guard let text = value as? String else { throw FerryError(.invalidRequest, "wrong type for '\(name)'") }
            return text
        }
        func object(_ name: String) throws(FerryError) -> AttributeMap? {
            // Decided by the text: Foundation's reader may not read it (a number past a Double's range).
            guard let member = members.last(where: { $0.name == name }), !(json[name] is NSNull) else { return nil }
            guard text[member.value].first == UInt8(ascii: "{") else { throw FerryError(.invalidRequest, "'\(name)' must be a JSON object") }
            return try ItemJSONText.map(text, at: member.value, field: name)
        }
        guard let id = try string("id") else { throw FerryError(.invalidRequest, "missing required field 'id'") }
        guard RequestDecoder.isValidId(id) else {
            throw FerryError(.invalidRequest, "id must be 1-\(RequestDecoder.maxIdLength) characters of [A-Za-z0-9._:-]")
        }
        guard let table = try string("table") else { throw FerryError(.invalidRequest, "missing required field 'table'") }
        if let problem = TableDefinition.nameProblem(table) { throw problem }
        var accessLevel: AccessLevel?
        if let level = try string("accessLevel") {
            guard let parsed = AccessLevel(rawValue: level) else { throw FerryError(.invalidRequest, "invalid value for 'accessLevel'") }
            accessLevel = parsed
        }
        let identityId = try string("identityId")
        if let identityId, !identityId.isEmpty, let problem = IdentityRule.violation(of: identityId, field: "identityId") { throw problem }
        let item = try object("item") ?? [:]
        let key = try object("key") ?? [:]
        var remove: [String] = []
        if let value = json["remove"], !(value is NSNull) {
            guard let names = value as? [String], names.allSatisfy({ !$0.isEmpty && $0.utf8.count <= 255 }) else {
                throw FerryError(.invalidRequest, "'remove' must be a list of attribute names")
            }
            remove = names
        }
        switch op {
        case .putItem:
            guard json["item"] != nil else { throw FerryError(.invalidRequest, "putItem needs an 'item'") }
            guard key.isEmpty, remove.isEmpty else { throw FerryError(.invalidRequest, "putItem takes 'item' only (its key attributes are in it)") }
        case .updateItem:
            guard !key.isEmpty else { throw FerryError(.invalidRequest, "updateItem needs a 'key'") }
            guard !item.isEmpty || !remove.isEmpty else { throw FerryError(.invalidRequest, "updateItem needs 'item' (attributes to set) or 'remove'") }
        case .deleteItem:
            guard !key.isEmpty else { throw FerryError(.invalidRequest, "deleteItem needs a 'key'") }
            guard item.isEmpty, remove.isEmpty else { throw FerryError(.invalidRequest, "deleteItem takes 'key' only") }
        }
        let callback = try string("callback")
        if let callback { _ = try CompletionCallback(callback) }
        let request = try ItemRequest(id: id, op: op, table: table, item: item, key: key, remove: remove,
                                      accessLevel: accessLevel, identityId: identityId, auth: try string("auth"), callback: callback)
        let level = request.effectiveAccessLevel
        if level != .guest, identityId?.isEmpty ?? true {
            throw FerryError(.invalidRequest, "accessLevel \(level.rawValue) needs an identityId")
        }
        return request
    }
}
