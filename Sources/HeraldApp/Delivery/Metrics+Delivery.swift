import HeraldStore

extension Metrics {
    /// A webhook or gorush request's outcome for its job.
    package func deliveryAttempt(outcome: DeliveryRequest.Outcome, status: String) {
        let name = switch outcome {
        case .delivered: "delivered"
        case .retry: "retry"
        case .dead: "dead"
        case .notSent: "not_sent"
        }
        deliveryAttempt(platform: "", outcome: name, status: status)
    }
}
