import GRDB
import Synchronization

/// Group commit: write operations that arrive while a transaction is being
/// written wait for the next one, which carries all of them. Under load many
/// outcomes share one fsync; alone, an operation is written at once. Each
/// operation runs in its own savepoint, so one failing leaves the others.
final class WriteBatcher: Sendable {
    typealias Operation = @Sendable (Database) throws -> Void

    private struct Pending: Sendable {
        var operation: Operation
        var continuation: CheckedContinuation<Void, any Error>
    }
    private struct State {
        var pending: [Pending] = []
        var writing = false
    }
    private let state = Mutex(State())
    private let database: DatabasePool

    init(database: DatabasePool) { self.database = database }

    func write(_ operation: @escaping Operation) async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            let startWriter = state.withLock { s -> Bool in
                s.pending.append(Pending(operation: operation, continuation: continuation))
                guard !s.writing else { return false }
                s.writing = true
                return true
            }
            // Detached: a caller's cancellation must not abort a transaction that carries others' writes.
            if startWriter { Task.detached { [self] in await drain() } }
        }
    }

    private func drain() async {
        while true {
            let batch = state.withLock { s -> [Pending] in
                defer { s.pending = [] }
                if s.pending.isEmpty { s.writing = false }
                return s.pending
            }
            guard !batch.isEmpty else { return }
            let operations = batch.map(\.operation)
            let results: [Result<Void, any Error>]
            do {
                results = try await database.write { db in
                    operations.map { operation in
                        Result { try db.inSavepoint { try operation(db); return .commit } }
                    }
                }
            } catch {
                results = batch.map { _ in .failure(error) }
            }
            for (pending, result) in zip(batch, results) { pending.continuation.resume(with: result) }
        }
    }
}
