import Glibc

/// A thread of its own for a loop that sleeps most of its life (one per delivering app), outside
/// Dispatch's pool: libdispatch on Linux runs at most a fixed number of worker threads (255), and
/// a queue whose block waits on a semaphore holds one of them for as long as it waits. With
/// enough such loops every worker was taken: new loops never started, and short work items
/// (recording a batch's outcomes) queued behind them forever.
public enum DetachedThread {
    /// Starts `body` on a new detached thread with a stack of `stackSize` bytes (the loops' work
    /// is shallow; the system's default is 8 MB). Returns false when no thread could be made.
    @discardableResult
    public static func start(stackSize: Int = 512 << 10, _ body: @escaping @Sendable () -> Void) -> Bool {
        final class Box: Sendable {
            let body: @Sendable () -> Void
            init(_ body: @escaping @Sendable () -> Void) { self.body = body }
        }
        let box = Unmanaged.passRetained(Box(body))
        var handle = pthread_t()
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        defer { pthread_attr_destroy(&attributes) }
        pthread_attr_setstacksize(&attributes, stackSize)
        let made = pthread_create(&handle, &attributes, { pointer in
            Unmanaged<Box>.fromOpaque(pointer!).takeRetainedValue().body()
            return nil
        }, box.toOpaque())
        guard made == 0 else {
            box.release()
            return false
        }
        pthread_detach(handle)
        return true
    }
}
