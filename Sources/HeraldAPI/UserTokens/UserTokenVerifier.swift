import HeraldDomain
import HeraldStore
import FoundationEssentials
import HTTPServer
import Locking
import Postgres
import Secrets

/// Checks user tokens (SPEC §15) against the keys in `token_keys`: one indexed read per token
/// (so a deleted key is refused from the next request on, on every instance), the parsed public
/// keys cached by kid (a kid's key never changes; kids are never reused).
package final class UserTokenVerifier: Sendable {
    /// A refused token, with its app's settings when the signature verified (an expired token of
    /// an allowed origin still gets CORS headers, so the page can read the 401 and refresh).
    package struct Failure: Error {
        package let rejection: UserToken.Rejection
        package let access: UserAccessSettings?
    }

    private let store = TokenKeyStore()
    private let publicKeys = Lock([String: PublicKey]())
    private static let maxCachedKeys = 10_000

    /// The grant of a valid token and its app's settings for user requests.
    package func verify(_ text: String, database: PostgresPool, now: Double = Date().timeIntervalSince1970) throws
        -> (grant: UserToken.Grant, access: UserAccessSettings) {
        let token: UserToken
        do { token = try UserToken.parse(text) } catch { throw Failure(rejection: error, access: nil) }
        guard let row = try database.withConnection({ try store.lookup(kid: token.kid, on: $0) }) else {
            throw Failure(rejection: .invalid("no token key has this kid"), access: nil)
        }
        let material: UserToken.Key.Material
        switch row.algorithm {
        case .hs256:
            material = .secret(row.secret ?? [])
        case .rs256, .es256:
            guard let key = publicKey(kid: token.kid, pem: row.publicKey ?? "") else {
                throw Failure(rejection: .invalid("the token key cannot be read"), access: nil)
            }
            material = .publicKey(key)
        }
        let key = UserToken.Key(kid: token.kid, app: row.app, algorithm: row.algorithm, material: material)
        do {
            return (try token.verify(with: key, now: now), row.access)
        } catch {
            // Only a rejection after the signature verified says anything about the app.
            let signed = if case .expired = error { true } else { false }
            throw Failure(rejection: error, access: signed ? row.access : nil)
        }
    }

    private func publicKey(kid: String, pem: String) -> PublicKey? {
        if let cached = publicKeys.withLock({ $0[kid] }) { return cached }
        guard let parsed = PublicKey(pem: pem) else { return nil }
        publicKeys.withLock { table in
            if table.count >= Self.maxCachedKeys { table.removeAll() }
            table[kid] = parsed
        }
        return parsed
    }
}
