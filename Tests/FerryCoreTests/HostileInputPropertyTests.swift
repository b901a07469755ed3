import FerryCore
import FerryTestSupport
import Foundation
import PropertyBased
import Testing

/// The guarantees about hostile input, stated as invariants and checked on
/// generated values (seeded: a failure prints the seed that reproduces it).
@Suite struct HostileInputPropertyTests {
    static let sandbox = HostileRequestGenerator.Sandbox(
        dataRoot: URL(fileURLWithPath: "/srv/ferry-prop/data"), outside: URL(fileURLWithPath: "/srv/ferry-prop/outside"),
        bucket: "fuzz", victimBucket: "victim", validSource: URL(fileURLWithPath: "/srv/ferry-prop/data/in.txt"))

    /// Whole messages: each from a generator seeded by the property checker.
    static let messages = Generator<HostileRequestGenerator.Message, Shrink.None<HostileRequestGenerator.Message>> { rng in
        var generator = HostileRequestGenerator(seed: UInt64.random(in: 0...UInt64.max, using: &rng), sandbox: sandbox)
        return generator.next()
    }

    /// Invariant: no message stops the decoder. Every message gets a verdict: a
    /// request that passes every value rule, or an error with a code and a reason.
    @Test func theDecoderAnswersEveryMessage() async {
        await propertyCheck(count: 3000, input: Self.messages) { message in
            // Yields between inputs: the checks are long synchronous loops, and on two cores
            // (ThreadSanitizer: for a minute) they held the cooperative pool from the other tests.
            await Task.yield()
            switch RequestDecoder.decode(message.value) {
            case .success(let request):
                #expect(RequestDecoder.validate(request) == nil)
                #expect(ObjectKeyRule.violation(of: request.key) == nil)
            case .failure(let failure):
                #expect(!failure.error.message.isEmpty)
                #expect(!failure.error.code.rawValue.isEmpty)
                if let id = failure.id { #expect(RequestDecoder.idHint(Array("{\"id\":\"\(id)\"}".utf8)) == id) }
            }
            // What a rejection carries on (the status's op, the metrics' op label) is an
            // operation Ferry has, never a producer's string: one label value per message
            // would grow the worker's memory and /metrics without end.
            if case .failure(let failure) = RequestDecoder.decodeAny(message.value), let op = failure.op {
                #expect(TransferOperation(rawValue: op) != nil || ItemOperation(rawValue: op) != nil, "op \(op.prefix(80))")
            }
        }
    }

    /// Invariant: numbers from outside never trap. Any option value either is
    /// refused with a reason or lies in its documented range, and the
    /// conversions Ferry makes from it are total.
    @Test func numbersNeverTrap() async {
        let doubles = Gen<Double?>.element(of: [0, -0.0, 1e21, -1e21, .infinity, -.infinity, .nan, .greatestFiniteMagnitude,
                                                 .leastNonzeroMagnitude, 9.2233720368547758e18, 604_800, 604_800.0001, 0.999])
            .map { $0 ?? 0 }
        await propertyCheck(count: 500, input: Gen.double(in: -1e300...1e300), doubles) { random, edge in
            await Task.yield()
            for value in [random, edge] {
                _ = Duration.seconds(clamping: value)
                _ = value.clampedInt()
                _ = value.clampedInt(0...100)
                let problem = TransferOptionRanges.violation(of: TransferOptions(timeoutSeconds: value))
                #expect((problem == nil) == (value.isFinite && (1...604_800).contains(value)))
            }
        }
        // The same numbers as JSON in every numeric option: always a verdict.
        for literal in HostileInput.numberLiterals {
            for option in ["partSizeBytes", "partConcurrency", "retryLimit", "timeoutSeconds"] {
                let json = #"{"id":"n","op":"delete","bucket":"fuzz","key":"k","options":{"\#(option)":\#(literal)}}"#
                if case .success(let request) = RequestDecoder.decode(Array(json.utf8)) {
                    #expect(TransferOptionRanges.violation(of: request.options!) == nil)
                }
            }
        }
    }

    /// Invariant: base64 is decoded strictly: exactly canonical encodings decode, to their bytes.
    @Test func base64IsStrict() async {
        await propertyCheck(count: 500, input: Gen.uint8().array(of: 0...40)) { bytes in
            await Task.yield()
            #expect(StrictBase64.decode(Array(Data(bytes).base64EncodedString().utf8)) == bytes)
        }
        let alphabet = Array("ABCDQRSTabcxyz019+/=".utf8)
        let texts = Gen<UInt8?>.element(of: alphabet).map { $0 ?? 65 }.array(of: 0...12)
        await propertyCheck(count: 2000, input: texts) { text in
            await Task.yield()
            if let decoded = StrictBase64.decode(text) {
                #expect(Array(Data(decoded).base64EncodedString().utf8) == text, "accepted a non-canonical encoding")
            }
        }
        #expect(StrictBase64.decode(Array("====".utf8)) == nil)
        #expect(StrictBase64.decode(Array("QQ==".utf8)) == [0x41])
    }

    /// Invariant: the id read without decoding is the top-level id, never a nested one.
    @Test func idHintReadsOnlyTheTopLevelId() async {
        let ids = Gen.letterOrNumber.string(of: 1...20)
        await propertyCheck(count: 500, input: ids, ids, HostileInput.jsonValues) { outer, inner, noise in
            await Task.yield()
            let text = #"{"a":{"id":"\#(inner)"},"list":[{"id":"x"}],"noise":\#(noise),"id":"\#(outer)"}"#
            let hint = RequestDecoder.idHint(Array(text.utf8))
            // When the document is well formed, the hint is the outer id; it is never the nested one.
            if hint != nil { #expect(hint == outer) }
        }
        #expect(RequestDecoder.idHint(Array(#"{"nested":{"id":"no"}}"#.utf8)) == nil)
        #expect(RequestDecoder.idHint(Array(#"  {"id" : "yes-1"}"#.utf8)) == "yes-1")
        #expect(RequestDecoder.idHint(Array(#"{"id":"a b"}"#.utf8)) == nil)
    }
}

