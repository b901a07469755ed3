import Foundation

/// Counts a process's established TCP connections to a port, from /proc:
/// the socket inodes among its descriptors, matched against the kernel's
/// connection tables. What the process really holds, whatever its code says.
public enum SocketCensus {
    public static func established(pid: pid_t, toPort port: Int) -> Int {
        guard let fds = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd") else { return 0 }
        var inodes: Set<String> = []
        for fd in fds {
            guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\(fd)"),
                  target.hasPrefix("socket:[") else { continue }
            inodes.insert(String(target.dropFirst("socket:[".count).dropLast()))
        }
        let wantedPort = String(format: "%04X", port)
        // The tables are read in pieces while other sockets open and close, and
        // the kernel can then list one socket more than once: count inodes, not lines.
        var matched: Set<Substring> = []
        for table in ["tcp", "tcp6"] {
            // Read to the end: /proc files report a size of 0, which String(contentsOfFile:) trusts.
            guard let handle = FileHandle(forReadingAtPath: "/proc/\(pid)/net/\(table)"),
                  let data = try? handle.readToEnd() else { continue }
            try? handle.close()
            let text = String(decoding: data, as: UTF8.self)
            for line in text.split(separator: "\n").dropFirst() {
                // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
                let fields = line.split(separator: " ", omittingEmptySubsequences: true)
                guard fields.count > 9, fields[3] == "01",
                      fields[2].split(separator: ":").last.map(String.init) == wantedPort,
                      inodes.contains(String(fields[9])) else { continue }
                matched.insert(fields[9])
            }
        }
        return matched.count
    }
}
