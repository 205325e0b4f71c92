/// A job's kind (SPEC §9's `kind`): what it tells the device. The database keeps the name in
/// `job_rows.kind` (NULL for a message's own job, which is `message` or `reply` by its parent).
package enum JobKind: String, Sendable, CaseIterable {
    case message, reply, clear, retract, update, reaction, memberAction, sync, digest

    /// The kind as `job_rows.kind` stores it: nil for a message's job.
    package var stored: String? { self == .message || self == .reply ? nil : rawValue }

    /// The kind a stored `job_rows.kind` names (nil: a message's job, whose kind its parent decides).
    package init?(stored: String?) {
        guard let stored, let kind = JobKind(rawValue: stored), kind.stored != nil else { return nil }
        self = kind
    }
}
