
/// The advisory locks that serialise changes to derived state, by what actually conflicts:
///
/// - a thread (`t:<thread>`, exclusive): its messages, edits, deletions, subscription changes,
///   read marks and fan-out chunks;
/// - a group (`g:<guid>`): shared by everything that works on one of its threads, exclusive for
///   what changes its membership (member events, snapshots, a message from a sender who was not a
///   member, `group.deleted`), which touches every thread of the group.
///
/// So replies in different threads of one group run side by side, and a membership change waits
/// for them and they for it. All locks of a set are taken in one statement, in one global order,
/// so two sets cannot deadlock on each other.
package struct LockSet: Sendable, Equatable {
    package private(set) var exclusive: Set<String> = []
    package private(set) var shared: Set<String> = []

    package init() {}

    package var isEmpty: Bool { exclusive.isEmpty && shared.isEmpty }

    /// The key of a thread's lock.
    package static func threadKey(_ thread: String) -> String { "t:" + thread }

    /// The key of a group's lock.
    package static func groupKey(_ group: String) -> String { "g:" + group }

    /// A thread, in a group (nil: a one-on-one thread).
    package mutating func thread(_ thread: String, group: String?) {
        exclusive.insert(Self.threadKey(thread))
        if let group { shared.insert(Self.groupKey(group)) }
    }

    /// A group's membership.
    package mutating func group(_ group: String) {
        exclusive.insert(Self.groupKey(group))
    }

    /// What `other` holds that this set does not (a shared lock held where `other` wants it
    /// exclusive counts as missing).
    package func missing(from other: LockSet) -> LockSet {
        var missing = LockSet()
        missing.exclusive = other.exclusive.subtracting(exclusive)
        missing.shared = other.shared.subtracting(shared).subtracting(exclusive)
        return missing
    }

    package mutating func formUnion(_ other: LockSet) {
        exclusive.formUnion(other.exclusive)
        shared.formUnion(other.shared)
    }

    /// Every key of the set, exclusive or shared.
    package var keys: Set<String> { exclusive.union(shared) }

    /// The locks of this set whose keys are among `keys`, each as this set holds it.
    package func restricted(to keys: Set<String>) -> LockSet {
        var kept = LockSet()
        kept.exclusive = exclusive.intersection(keys)
        kept.shared = shared.intersection(keys)
        return kept
    }

}


/// Raised inside an ingest transaction that finds it needs a lock it does not hold (a sender
/// whose message turned out to be membership evidence under a shared group lock); the
/// transaction is rolled back and run again with it.
package struct NeedsLocks: Error {
    package let locks: LockSet
    /// Membership evidence: the next try holds every group of the batch exclusively. A thread
    /// learned late (a parent found to be a reply) needs only its own locks.
    package var groups = true

    package init(locks: LockSet, groups: Bool = true) {
        self.locks = locks
        self.groups = groups
    }
}

/// Messages and subscriptions filed under `from`, a reply that was not yet known to be one, that
/// belong to the thread `to` (its root, whose author is `rootSender` when known).
package struct Rehoming: Sendable {
    package let from: String
    package let to: String
    package let rootSender: String?

    package init(from: String, to: String, rootSender: String?) {
        self.from = from
        self.to = to
        self.rootSender = rootSender
    }
}
