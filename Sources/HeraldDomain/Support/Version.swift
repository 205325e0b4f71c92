/// Herald's version, as `herald version`, `/metrics` and the OpenAPI file say it.
package enum HeraldVersion {
    package static let current = "0.1.0"
}
