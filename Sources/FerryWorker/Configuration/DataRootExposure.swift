import FerryEngine

/// A request reaches every file under the data root: `file://` sources are
/// read and uploaded, destinations written. So Ferry's own state, a local
/// store's blobs (every access level's objects) and files holding secrets
/// must lie outside it, or any producer could read or replace them.
public enum DataRootExposure {
    /// The first of `paths` (option and path) inside `dataRoot`, as a refusal.
    public static func problem(dataRoot: DataRoot, paths: [(option: String, path: String)]) -> String? {
        for (option, path) in paths where dataRoot.contains(path) {
            return "\(option) \(path) lies inside the data root \(dataRoot.path): any request could read or replace it "
                + "through a file:// source or destination; put it outside the data root"
        }
        return nil
    }
}
