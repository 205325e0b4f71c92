import HeraldDomain
import HeraldStore
/// The registry behind a long-poll waiter (`ChangeWaiter`, `JobWaiter`): the waiting requests by
/// id, each key's requests oldest first (a key is a user's feed, or an app's claims), and which
/// keys are due for another try. A request stays registered from `add` until `remove`, so a
/// notification that comes while a pass works (`markDue`) is kept for the next pass: never lost.
/// A value type, kept under its waiter's lock.
package struct WaitingSet<Item: Sendable>: Sendable {
    package private(set) var items: [UInt64: Item] = [:]
    private var byKey: [String: [UInt64]] = [:]
    /// Keys that may have something since the last `takeDue`.
    private var due: Set<String> = []
    private var allDue = false
    private var nextID: UInt64 = 0

    package var count: Int { items.count }
    package var keys: [String] { Array(byKey.keys) }

    /// Registers `item` under `key`, due at once (a first try now that it is registered).
    package mutating func add(_ item: Item, key: String) {
        nextID += 1
        items[nextID] = item
        byKey[key, default: []].append(nextID)
        due.insert(key)
    }

    /// Marks the keys that have waiting requests due; says whether any had.
    package mutating func markDue(_ keys: some Sequence<String>) -> Bool {
        var any = false
        for key in keys where byKey[key] != nil {
            due.insert(key)
            any = true
        }
        return any
    }

    /// Every key is due (a listener that connected again, a timer).
    package mutating func markAllDue() { allDue = true }

    /// Whether no key was marked due since the last `takeDue` (a pass that a timer started).
    package var nothingDue: Bool { due.isEmpty && !allDue }

    /// The due keys' requests, oldest first per key — every key's when `everything` or when all
    /// were marked due — and clears what was due: a key marked from here on is due again.
    package mutating func takeDue(everything: Bool) -> [(key: String, requests: [(id: UInt64, item: Item)])] {
        defer { due.removeAll(); allDue = false }
        let keys = everything || allDue ? Array(byKey.keys) : Array(due)
        return keys.map { key in (key, (byKey[key] ?? []).compactMap { id in items[id].map { (id, $0) } }) }
    }

    /// Removes a request (nil when it was already answered), with its key.
    package mutating func remove(_ id: UInt64, key: (Item) -> String) -> Item? {
        guard let item = items.removeValue(forKey: id) else { return nil }
        let name = key(item)
        byKey[name]?.removeAll { $0 == id }
        if byKey[name]?.isEmpty == true { byKey[name] = nil }
        return item
    }
}
