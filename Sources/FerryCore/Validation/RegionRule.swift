/// The rule for a signing region (`--region`, `AWS_REGION`, `s3.region`): it
/// is one segment of SigV4's credential scope (`date/region/s3/aws4_request`)
/// and, without an endpoint, part of the AWS host name, so it is 1…64
/// letters, digits, `-`, `_` and `.`. AWS's regions (`us-east-1`), Ceph's
/// zonegroups (`default`) and other stores' names (`auto`, `fr-par`) fit.
public enum RegionRule {
    public static let maxBytes = 64

    /// Why `region` breaks the rule (nil when it does not).
    public static func violation(of region: String) -> FerryError? {
        let bytes = region.utf8
        guard (1...maxBytes).contains(bytes.count) else {
            return FerryError(.invalidRequest, "region must be 1–\(maxBytes) characters, got \(bytes.count)")
        }
        let allowed = bytes.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."): true
            default: false
            }
        }
        guard allowed else {
            return FerryError(.invalidRequest,
                              "region \(TextClip.clipped(region, toUTF8: 80).debugDescription) may hold letters, digits, '-', '_' and '.' only (such as us-east-1)")
        }
        return nil
    }
}
