import FerryCore
@testable import FerryEngine
import FerryTestSupport
import Foundation
import Testing

/// The data root's confinement by access level, at the source: thousands of
/// generated (caller, read or write, target, spelling) cases against
/// `DataRoot` on a tree with links of both kinds into other areas, while
/// another thread keeps swapping a public directory with a link to bob's
/// private area. A read that is allowed yields the bytes of a file its caller
/// may read; a write that is allowed opens a directory where its caller may
/// write (read back from the descriptor); everything else is `AccessDenied`
/// or `InvalidPath`. Seeded: FERRY_FUZZ_SEED replays.
@Suite struct LocalAreaPathPropertyTests {
    @Test func pathsOpenOnlyInsideTheCallersAreas() throws {
        let seed = FuzzReplay.seed, total = FuzzReplay.messages(default: 4000)
        var rng = SeededGenerator(seed: seed)
        let base = try TestPaths.temporaryDirectory("area-paths")
        defer { try? FileManager.default.removeItem(at: base) }
        let (root, _) = try LocalAreaTree.build(in: base)
        let dataRoot = try DataRoot(root.path)
        let swapper = LocalAreaTree.Swapper(root.appendingPathComponent("public"))
        swapper.start()
        defer { swapper.stop() }
        var allowed = 0, refused = 0
        for n in 0..<total {
            let caller = ["alice", "bob", "guest"].randomElement(using: &rng)!
            let areas = LocalAreas(caller: Caller(role: caller == "guest" ? .guest : .authenticated, identityId: caller == "guest" ? nil : caller),
                                   permissions: .defaults)
            let reading = Bool.random(using: &rng)
            let plain = reading ? LocalAreaTree.readTargets.randomElement(using: &rng)!
                : [LocalAreaTree.writeDirectories.randomElement(using: &rng)!, "n\(n).bin"].filter { !$0.isEmpty }.joined(separator: "/")
            let spelled = PathSpelling.spell(plain.split(separator: "/").map(String.init), using: &rng)
            let uri = "file://" + root.path + "/" + spelled
            let what = "seed \(seed): \(caller) \(reading ? "reads" : "writes") '\(spelled)'"
            do throws(FerryError) {
                if reading {
                    let path = try dataRoot.sourcePath(uri, areas: areas)
                    let fd = try dataRoot.openBeneath(path, flags: O_RDONLY, areas: areas)
                    var bytes = [UInt8](repeating: 0, count: 256)
                    let count = read(fd, &bytes, bytes.count)
                    close(fd)
                    let content = String(decoding: bytes.prefix(max(0, count)), as: UTF8.self)
                    #expect(LocalAreaTree.readable(by: caller).contains(content), "\(what): read '\(content)'")
                } else {
                    try dataRoot.checkDestination(uri, areas: areas)
                    let path = try dataRoot.destinationPath(uri, areas: areas)
                    let (directory, _) = try dataRoot.openParentBeneath(path, create: true)
                    let opened = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(directory)")) ?? "?"
                    close(directory)
                    let components = opened.hasPrefix(root.path + "/") ? opened.dropFirst(root.path.count + 1).split(separator: "/").map(String.init) : []
                    #expect(LocalAreaTree.writable(components + ["file"], by: caller), "\(what): would write into \(opened)")
                }
                allowed += 1
            } catch {
                #expect(error.code == .accessDenied || error.code == .invalidPath, "\(what): \(error)")
                refused += 1
            }
        }
        print("local area paths: seed \(seed), \(total) cases, \(allowed) allowed, \(refused) refused")
        #expect(allowed > total / 10 && refused > total / 10)
    }
}
