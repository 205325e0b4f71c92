import HeraldDomain
import HeraldStore
import HTTPServer
import Postgres
import JSON

/// `/healthz`, `/readyz`, `/metrics`, `/openapi.json` and `/v1/whoami`.
package enum OperationsAPI {
    /// What its handlers use: the readiness check's database and migrator, and what `/metrics`
    /// and `/openapi.json` serve.
    package struct Services: HandlerServices {
        package let database: PostgresPool
        package let migrator: Migrator
        package let metrics: Metrics
        package let openAPI: OpenAPIDocument
        /// The gauges `/metrics` reads besides the counters.
        package let gauges: @Sendable () -> Metrics.Gauges

        package init(_ all: Dependencies) {
            (database, migrator, metrics, openAPI) = (all.database, all.migrator, all.metrics, all.openAPI)
            let (delivery, jobWaiter, changeWaiter, maxLongPolls) = (all.delivery, all.jobWaiter, all.changeWaiter,
                                                                    all.configuration.maxLongPolls)
            let database = all.database
            gauges = {
                var gauges = Metrics.Gauges(pools: [("request", database), ("delivery", delivery.database)])
                gauges.claimsWaiting = jobWaiter.waitingCount
                gauges.feedsWaiting = changeWaiter.waitingCount
                gauges.longPollsMax = maxLongPolls
                return gauges
            }
        }
    }

    package typealias Context = RequestContext<Services>

    package static func register(in router: inout Router<Route>) {
        router.add(.get, "/healthz", Route(access: .public) { (_: Context) in
            Response.jsonText(#"{"status":"ok"}"#)
        })
        router.add(.get, "/readyz", Route(access: .public, handler: readiness))
        router.add(.get, "/metrics", Route(access: .public) { (context: Context) in
            Response(status: 200, headers: [("Content-Type", "text/plain; version=0.0.4; charset=utf-8")],
                     body: Array(context.services.metrics.render(context.services.gauges()).utf8))
        })
        router.add(.get, "/openapi.json", Route(access: .public) { (context: Context) in
            Response(status: 200, headers: [("Content-Type", "application/json")], body: context.services.openAPI.bytes)
        })
        router.add(.get, "/v1/whoami", Route(access: .anyAppKey, handler: whoami))
    }

    /// 200 when the database answers and its schema is the one this binary expects; else 503.
    package static func readiness(_ context: Context) throws -> Response {
        let services = context.services
        let applied: Int
        do {
            applied = try services.database.withConnection { try services.migrator.appliedVersion($0) }
        } catch let error as PostgresError where error.isUnavailable || error.code == .poolTimeout {
            var failure = HTTPError.unavailable()
            failure.message = "the database is unreachable"
            failure.params = ["check": "database"]
            throw failure
        }
        let expected = services.migrator.latestVersion
        guard applied >= expected else {
            var failure = HTTPError.unavailable()
            failure.message = "the database schema is behind: version \(applied), this binary needs \(expected)"
            failure.params = ["check": "schema", "schemaVersion": .int(applied), "expectedVersion": .int(expected)]
            throw failure
        }
        return .json(Readiness(status: "ready", schemaVersion: applied))
    }

    package struct Readiness: JSONWritable {
        package let status: String
        package let schemaVersion: Int

        package func write(to writer: inout JSONWriter) {
            writer.object { $0.field("schemaVersion", schemaVersion); $0.field("status", status) }
        }
    }

    package struct WhoAmI: JSONWritable {
        package let app: String
        package let role: String
        package let keyId: String?

        package func write(to writer: inout JSONWriter) {
            writer.object { who in
                who.field("app", app)
                if let keyId { who.field("keyId", keyId) }
                who.field("role", role)
            }
        }
    }

    /// Which app and role the caller's key acts as: for checking a key without side effects.
    package static func whoami(_ context: Context) throws -> Response {
        var keyID: String?
        if case .key(let id, _) = context.principal.kind { keyID = id }
        return .json(WhoAmI(app: context.app, role: context.principal.roleName ?? "", keyId: keyID))
    }
}

