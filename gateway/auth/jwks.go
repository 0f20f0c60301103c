package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/sync/singleflight"
	"golang.org/x/time/rate"
)

// maxMetadataBytes bounds a fetched metadata document or key set.
const maxMetadataBytes = 1 << 20

// maxKeys bounds the signing keys kept per issuer.
const maxKeys = 64

// keySet is the signing keys of one authorization server (its JWKS), kept
// in memory and fetched again:
//   - when a token names a key id the set does not have (the server
//     rotated its keys): a few times in a row (refreshBurst), then at most
//     once per minRefresh, so tokens with made-up key ids cannot make this
//     node hammer the server;
//   - when the set is older than maxAge (keys the server removed stop
//     being accepted within that time even if no new key shows up).
//
// A fetch replaces the whole set: a key the server no longer publishes is
// forgotten at once. A failed fetch keeps the old set (a server that is
// down does not lock every client out); attempts, failed or not, come out
// of the same budget.
type keySet struct {
	issuer  string
	jwksURL string // "" until discovered
	client  *http.Client
	now     func() time.Time
	maxAge  time.Duration
	// budget limits fetches: refreshBurst in a row, then one per
	// minRefresh.
	budget *rate.Limiter

	group singleflight.Group

	mu        sync.Mutex
	keys      []jose.JSONWebKey
	fetchedAt time.Time // last successful fetch
	lastErr   error     // the last attempt's error
	attempts  int       // fetch attempts so far
}

// refreshBurst is how many key set fetches may follow each other before
// the rate of one per minRefresh applies: the fetch at startup, the one a
// server that only creates its keys when first asked needs, and one
// rotation.
const refreshBurst = 3

// newKeySet returns the key set of issuer (jwksURL "" : discovered).
func newKeySet(issuer, jwksURL string, client *http.Client, now func() time.Time, maxAge, minRefresh time.Duration) *keySet {
	return &keySet{issuer: issuer, jwksURL: jwksURL, client: client, now: now, maxAge: maxAge,
		budget: rate.NewLimiter(rate.Every(minRefresh), refreshBurst)}
}

// errKeysUnavailable: the set could not be fetched and has no key for the
// token.
var errKeysUnavailable = errors.New("the authorization server's signing keys could not be fetched")

// lookup returns the keys that may have signed a token with key id kid
// ("": every key), fetching the set when it is empty, stale, or lacks kid
// (within the fetch budget). With a stale set that cannot be fetched
// it answers from the stale set; with no set at all, the error says so.
func (s *keySet) lookup(ctx context.Context, kid string) ([]jose.JSONWebKey, error) {
	s.mu.Lock()
	have := matching(s.keys, kid)
	fresh := !s.fetchedAt.IsZero() && s.now().Sub(s.fetchedAt) < s.maxAge
	seen := s.attempts
	s.mu.Unlock()
	if len(have) > 0 && fresh {
		return have, nil
	}
	err := s.refresh(ctx, seen)
	s.mu.Lock()
	have, next := matching(s.keys, kid), s.attempts
	s.mu.Unlock()
	if len(have) == 0 && err == nil && kid != "" && next == seen {
		// The fetch this caller waited for was already running when it
		// looked: it may predate the key (the fetch at startup, and the
		// server's first token signed with a key it created meanwhile).
		// One fetch that starts now decides, within the budget.
		err = s.refresh(ctx, next)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if have = matching(s.keys, kid); len(have) > 0 {
		return have, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errKeysUnavailable, err)
	}
	return nil, nil
}

// matching returns the keys of set that kid may name.
func matching(set []jose.JSONWebKey, kid string) []jose.JSONWebKey {
	if kid == "" {
		return set
	}
	for _, k := range set {
		if k.KeyID == kid {
			return []jose.JSONWebKey{k}
		}
	}
	return nil
}

// refresh fetches the set, once for every concurrent caller, unless it
// was fetched since the caller looked at it (attempt number seen) or the
// fetch budget is spent; then it returns the last attempt's error. The
// fetch is not cancelled with ctx (other callers wait for it too); ctx
// only ends this caller's wait.
func (s *keySet) refresh(ctx context.Context, seen int) error {
	ch := s.group.DoChan("fetch", func() (any, error) {
		s.mu.Lock()
		if s.attempts != seen || !s.budget.AllowN(s.now(), 1) {
			defer s.mu.Unlock()
			return nil, s.lastErr
		}
		s.attempts++
		s.mu.Unlock()
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), fetchTimeout(s.client))
		defer cancel()
		keys, err := s.fetch(fctx)
		s.mu.Lock()
		defer s.mu.Unlock()
		s.lastErr = err
		if err != nil {
			return nil, err
		}
		s.keys, s.fetchedAt = keys, s.now()
		return nil, nil
	})
	select {
	case r := <-ch:
		return r.Err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// fetchTimeout bounds one fetch when the client has no timeout of its own.
func fetchTimeout(c *http.Client) time.Duration {
	if c.Timeout > 0 {
		return c.Timeout
	}
	return DefaultHTTPTimeout
}

// fetch discovers the JWKS URL if need be and reads the key set.
func (s *keySet) fetch(ctx context.Context) ([]jose.JSONWebKey, error) {
	s.mu.Lock()
	jwksURL := s.jwksURL
	s.mu.Unlock()
	if jwksURL == "" {
		meta, err := DiscoverAuthServer(ctx, s.client, s.issuer)
		if err != nil {
			return nil, err
		}
		if meta.JWKSURI == "" {
			return nil, fmt.Errorf("auth: the metadata of %s has no jwks_uri", s.issuer)
		}
		jwksURL = meta.JWKSURI
		s.mu.Lock()
		s.jwksURL = jwksURL
		s.mu.Unlock()
	}
	var doc struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := getJSON(ctx, s.client, jwksURL, &doc); err != nil {
		return nil, fmt.Errorf("auth: signing keys of %s: %w", s.issuer, err)
	}
	var keys []jose.JSONWebKey
	for _, raw := range doc.Keys {
		var k jose.JSONWebKey
		if err := k.UnmarshalJSON(raw); err != nil {
			continue // a key type this library does not know: not one we can verify with
		}
		if (k.Use != "" && k.Use != "sig") || !k.Valid() {
			continue
		}
		if !k.IsPublic() {
			k = k.Public() // never keep private material someone published by mistake
		}
		keys = append(keys, k)
		if len(keys) == maxKeys {
			break
		}
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("auth: the key set at %s has no signing keys", jwksURL)
	}
	return keys, nil
}

// DiscoverAuthServer reads the metadata of the authorization server
// issuer: RFC 8414's /.well-known/oauth-authorization-server, else OpenID
// Connect's /.well-known/openid-configuration (with a path in the issuer,
// the forms the MCP authorization spec lists, in its order). The
// document's issuer must be issuer exactly. Unlike go-sdk's client-side
// discovery it accepts http:// and private addresses: the issuer is the
// operator's configuration, not something a peer sent.
func DiscoverAuthServer(ctx context.Context, client *http.Client, issuer string) (*oauthex.AuthServerMeta, error) {
	u, err := url.Parse(issuer)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("auth: issuer %q is not an http(s) URL", issuer)
	}
	path := strings.TrimRight(u.Path, "/")
	var candidates []string
	for _, form := range []string{"/.well-known/oauth-authorization-server%s", "/.well-known/openid-configuration%s", "%s/.well-known/openid-configuration"} {
		c := *u
		c.Path = fmt.Sprintf(form, path)
		if path == "" && strings.HasPrefix(form, "%s") {
			continue // the same as the second form
		}
		candidates = append(candidates, c.String())
	}
	var errs []error
	for _, c := range candidates {
		var meta oauthex.AuthServerMeta
		err := getJSON(ctx, client, c, &meta)
		var se *statusError
		if errors.As(err, &se) && se.status >= 400 && se.status < 500 {
			errs = append(errs, err)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("auth: metadata of %s: %w", issuer, err)
		}
		if meta.Issuer != issuer {
			return nil, fmt.Errorf("auth: the metadata at %s names issuer %q, not %q", c, meta.Issuer, issuer)
		}
		return &meta, nil
	}
	return nil, fmt.Errorf("auth: no metadata for issuer %s: %w", issuer, errors.Join(errs...))
}

// statusError is a non-200 answer to a GET.
type statusError struct {
	url    string
	status int
}

func (e *statusError) Error() string { return fmt.Sprintf("GET %s: status %d", e.url, e.status) }

// getJSON GETs u and decodes its JSON body (at most maxMetadataBytes).
func getJSON(ctx context.Context, client *http.Client, u string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fmt.Errorf("GET %s: %w", u, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %w", u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxMetadataBytes))
		return &statusError{url: u, status: resp.StatusCode}
	}
	if mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type")); err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
		return fmt.Errorf("GET %s: content type %q is not JSON", u, resp.Header.Get("Content-Type"))
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxMetadataBytes+1))
	if err != nil {
		return fmt.Errorf("GET %s: %w", u, err)
	}
	if len(body) > maxMetadataBytes {
		return fmt.Errorf("GET %s: larger than %d bytes", u, maxMetadataBytes)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("GET %s: %w", u, err)
	}
	return nil
}
