// Package auth authenticates gateway requests by bearer token — static keys
// or OAuth access tokens — and rate-limits them per principal.
//
// # Keys
//
// [Keys] maps bearer tokens to principals (mcpgrain.v1.Principal: user, org,
// role). It keeps only SHA-256 digests of the tokens. Keys come from a JSON
// file ([LoadKeysFile]), from the MCPGRAIN_KEYS environment variable
// ([ParseKeysEnv]) or from code ([NewKeys]); [Keys.Merge] combines sources:
//
//	fileKeys, err := auth.LoadKeysFile("/etc/mcpgrain/keys.json") // chmod 600
//	if err != nil { ... }
//	envKeys, err := auth.ParseKeysEnv(os.Getenv(auth.EnvVar))
//	if err != nil { ... }
//	keys, err := fileKeys.Merge(envKeys)
//	if err != nil { ... }
//
// The file looks like
//
//	{"keys": [
//	  {"token": "mcpg_...", "user": "alice", "org": "acme", "role": "admin"},
//	  {"token": "mcpg_...", "user": "bob",   "org": "acme", "role": "member"},
//	  {"token": "mcpg_...", "user": "vera",  "org": "acme", "role": "viewer"}
//	]}
//
// and the variable like
//
//	MCPGRAIN_KEYS='mcpg_...=alice:acme:admin;mcpg_...=bob:acme:member'
//
// Roles ([RoleAdmin], [RoleMember], [RoleViewer]) decide what a principal
// may do besides seeing its organization's paused executions: admins and
// members decide them (members not with --approvers admin), viewers never;
// only admins reach the /debug/ routes.
//
// [GenerateToken] makes a suitable token. Error messages name the offending
// entry (file path and keys[i], or the variable's entry position) and never
// contain a token.
//
// # Authentication
//
// An [Authenticator] turns a request's "Authorization: Bearer <token>"
// header into a principal, or into an [*Error] that carries the status and
// the RFC 6750 WWW-Authenticate challenge to answer with:
//
//	authn := auth.NewAuthenticator(keys, auth.AuthOptions{Realm: "mcpgrain"})
//	p, err := authn.Authenticate(r)
//	if err != nil {
//		var ae *auth.Error
//		errors.As(err, &ae)
//		w.Header().Set("WWW-Authenticate", ae.WWWAuthenticate)
//		http.Error(w, ae.Message, ae.Status)
//		return
//	}
//
// [AuthOptions.NoAuth] authenticates every request as [Anonymous]; it is
// meant only for loopback experiments and the app enforces that.
//
// # OAuth access tokens
//
// Real MCP clients authenticate through the MCP authorization spec: this
// server is an OAuth 2.1 resource server. An [OAuth] verifies access
// tokens issued by trusted authorization servers and maps them to
// principals; [AuthOptions.OAuth] makes the Authenticator use it for every
// bearer token that is not a static key (keys are tried first, so both can
// be enabled):
//
//	jwt, err := auth.NewJWTVerifier(auth.JWTOptions{
//		Issuers:  []string{"https://login.example.com"}, // keys found by discovery
//		Audience: "https://mcp.example.com/mcp",         // this server's canonical resource URI
//	})
//	oa, err := auth.NewOAuth(auth.OAuthOptions{
//		Resource:             "https://mcp.example.com/mcp",
//		AuthorizationServers: []string{"https://login.example.com"},
//		JWT:                  jwt,
//		Claims:               auth.ClaimMapping{OrgClaim: "org"},
//	})
//	authn := auth.NewAuthenticator(keys, auth.AuthOptions{Realm: "mcpgrain", OAuth: oa})
//	paths, metadata := authn.ProtectedResource() // serve these, unauthenticated
//
// The parts:
//
//   - [JWTVerifier] checks JWT access tokens locally with go-jose: the
//     signature against the issuer's key set (fetched through RFC 8414 /
//     OpenID discovery, cached, fetched again when a token names an
//     unknown key id — at most once per [JWTOptions.KeysMinRefresh] — and
//     when older than [JWTOptions.KeysMaxAge]), an algorithm allow-list
//     (never "none" or HMAC), iss, aud (the canonical resource URI), exp
//     (required), nbf and iat with a small leeway.
//   - [Introspector] checks opaque tokens at the authorization server's
//     RFC 7662 endpoint (active answers cached briefly).
//   - [ClaimMapping] reads the user (default claim "sub"), the
//     organization (default "org"; nested paths like "ext.org" work) and
//     the role: the highest one the token's scopes ([RoleScopes]:
//     mcp:admin, mcp:approve, mcp:read by default) or an optional role
//     claim grant. A token that grants no role is refused with 403
//     insufficient_scope.
//   - Principals are keyed by issuer: a local issuer's tokens name them
//     as the static keys do; every other issuer's user and organization
//     are qualified, "<issuer>#<sub>" and "<issuer>#<org>"
//     ([OAuthOptions.LocalIssuers], [QualifiedName]), so no issuer's token
//     is another issuer's principal or a key's.
//
// Challenges then follow the MCP authorization spec: every 401 names the
// protected resource metadata (resource_metadata) and, without
// credentials, the scope to ask for; an invalid token gets
// error="invalid_token" with why (expired, not for this resource...); a
// role too low gets 403 error="insufficient_scope" naming the scope that
// would do ([Authenticator.InsufficientRole]). An authorization server
// that cannot be reached is a 503, not a 401.
//
// # Failed sign-ins
//
// A [FailureLimiter] ([AuthOptions.Failures]) gives each client address a
// budget of failed sign-ins (unknown or malformed tokens); an address out
// of it gets a 429 [Error] with [CodeRateLimited] and [Error.RetryAfter]
// for every attempt that carries credentials, a valid token included,
// until it earned one back:
//
//	authn := auth.NewAuthenticator(keys, auth.AuthOptions{Failures: auth.NewFailureLimiter(auth.FailureLimiterOptions{})})
//
// # Rate limiting
//
// A [Limiter] is a token bucket per principal (org and user): a
// golang.org/x/time/rate limiter each, kept in a bounded LRU cache. It
// counts on one node only: across N nodes behind a load balancer a
// principal gets up to N times the rate. When it refuses, answer 429 with
// a Retry-After header:
//
//	lim := auth.NewLimiter(auth.LimiterOptions{Rate: 10, Burst: 20})
//	if ok, retry := lim.Allow(p); !ok {
//		w.Header().Set("Retry-After", auth.RetryAfterSeconds(retry))
//		http.Error(w, "rate limited", http.StatusTooManyRequests)
//		return
//	}
package auth
