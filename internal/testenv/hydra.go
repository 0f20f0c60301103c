package testenv

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// HydraVersion is the Ory Hydra release pinned by tools/hydra/go.mod; the
// cached build lives in a directory named after it.
const HydraVersion = "v2.3.0"

// hydraReadyTimeout bounds how long StartHydra waits for the server.
const hydraReadyTimeout = 60 * time.Second

// hydraAccessTokenKeys is the key set Hydra signs JWT access tokens with.
const hydraAccessTokenKeys = "hydra.jwt.access-token"

// HydraCachePath returns where the pinned Hydra binary is cached:
// <os.UserCacheDir()>/mcpgrain/hydra-<HydraVersion>/hydra (on Linux
// usually ~/.cache/mcpgrain/hydra-v2.3.0/hydra), as tools/hydra/build.sh
// and [BuildHydra] write it.
func HydraCachePath() (string, error) { return hydraTool.cachePath() }

// HydraBinary returns the path of the Hydra binary: $MCPGRAIN_HYDRA_BIN,
// else the cached build at [HydraCachePath]. If neither exists, the
// integration tier builds it from tools/hydra (a minute or two the first
// time); the default tier skips t.
func HydraBinary(t testing.TB) string {
	t.Helper()
	return hydraTool.binary(t)
}

// BuildHydra builds the pinned Hydra into [HydraCachePath] unless it is
// there, and returns its path (like [BuildConsul]: one build for
// concurrent callers, renamed into place).
func BuildHydra(ctx context.Context) (string, error) { return hydraTool.build(ctx) }

// Hydra is an Ory Hydra authorization server started by [StartHydra]:
// OAuth 2.1 with the client credentials grant, JWT access tokens (RS256)
// or, per client, opaque ones, on 127.0.0.1 ports of its own, with a
// fresh Postgres database. A token hook served by the test process adds
// each client's claims (e.g. "org") to its access tokens.
type Hydra struct {
	bin        string
	dir        string
	logPath    string
	config     string
	dsn        string
	publicPort int
	adminPort  int
	hook       *httptest.Server

	mu     sync.Mutex
	claims map[string]map[string]any // client id → claims the hook adds
	cmd    *exec.Cmd
	done   chan struct{}
	log    *os.File
}

// HydraOptions configure [StartHydra].
type HydraOptions struct {
	// TopLevelClaims are the hook's claims Hydra writes at the top level of
	// JWT access tokens (oauth2.allowed_top_level_claims); every claim is
	// also under "ext". Default: "org".
	TopLevelClaims []string
}

// StartHydra starts Hydra for t: it creates a database on the Postgres
// server of MCPGRAIN_TEST_POSTGRES_URL, runs Hydra's migrations, serves
// it (`hydra serve all --dev`) and waits until it is ready. Hydra is
// stopped and its database dropped when t ends; its log is printed if t
// failed. Without a binary or Postgres it skips or fails t per tier.
func StartHydra(t testing.TB, o HydraOptions) *Hydra {
	t.Helper()
	if o.TopLevelClaims == nil {
		o.TopLevelClaims = []string{"org"}
	}
	h := &Hydra{bin: HydraBinary(t), dir: t.TempDir(), claims: map[string]map[string]any{}}
	h.logPath = filepath.Join(h.dir, "hydra.log")
	h.dsn = hydraDatabase(t)
	h.hook = httptest.NewServer(http.HandlerFunc(h.tokenHook))
	t.Cleanup(h.hook.Close)
	t.Cleanup(func() {
		h.Stop()
		if t.Failed() {
			t.Logf("hydra (%s) log tail:\n%s", h.Issuer(), h.LogTail(60))
		}
	})
	var lastErr error
	for attempt := range 3 { // a chosen port may be taken before hydra binds it
		ports, err := freePorts(2)
		if err != nil {
			t.Fatalf("find free ports: %v", err)
		}
		h.publicPort, h.adminPort = ports[0], ports[1]
		if err := h.writeConfig(o); err != nil {
			t.Fatalf("write hydra config: %v", err)
		}
		if attempt == 0 {
			if err := h.migrate(); err != nil {
				t.Fatalf("hydra migrate: %v\n%s", err, h.LogTail(40))
			}
		}
		if lastErr = h.start(); lastErr == nil {
			return h
		}
		t.Logf("hydra start attempt %d failed: %v", attempt+1, lastErr)
		h.Stop()
	}
	t.Fatalf("start hydra: %v\nlog tail:\n%s", lastErr, h.LogTail(60))
	return nil
}

// hydraDatabase creates a fresh database for one Hydra and returns its
// DSN; it is dropped when t ends.
func hydraDatabase(t testing.TB) string {
	t.Helper()
	name := "hydra_test_" + RandomSuffix(6)
	u := postgresObject(t, "hydra database "+name, "CREATE DATABASE "+name, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	u.Path = "/" + name
	q := u.Query()
	q.Del("search_path")
	if q.Get("sslmode") == "" {
		q.Set("sslmode", "disable")
	}
	u.RawQuery = q.Encode()
	return u.String()
}

func (h *Hydra) writeConfig(o HydraOptions) error {
	cfg := map[string]any{
		"dsn": h.dsn,
		"serve": map[string]any{
			"public": map[string]any{"host": "127.0.0.1", "port": h.publicPort},
			"admin":  map[string]any{"host": "127.0.0.1", "port": h.adminPort},
		},
		"urls": map[string]any{
			"self": map[string]any{"issuer": h.Issuer()},
			// The client credentials grant has no login or consent; Hydra
			// still wants the URLs.
			"login":   h.Issuer() + "/unused/login",
			"consent": h.Issuer() + "/unused/consent",
		},
		"secrets":    map[string]any{"system": []string{"mcpgrain-test-hydra-system-secret-" + RandomSuffix(8)}},
		"strategies": map[string]any{"access_token": "jwt"},
		"oauth2": map[string]any{
			"allowed_top_level_claims": o.TopLevelClaims,
			"token_hook":               h.hook.URL + "/token-hook",
		},
		"log": map[string]any{"level": "info", "format": "text"},
	}
	b, err := json.MarshalIndent(cfg, "", "  ") // YAML is a superset of JSON
	if err != nil {
		return err
	}
	h.config = filepath.Join(h.dir, "hydra.yml")
	return os.WriteFile(h.config, b, 0o600)
}

// hydraEnv is the environment of Hydra's processes: no telemetry.
func hydraEnv() []string { return append(os.Environ(), "SQA_OPT_OUT=true") }

func (h *Hydra) migrate() error {
	logf, err := os.OpenFile(h.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(h.bin, "migrate", "sql", "up", "--read-from-env", "--yes", "--config", h.config)
	cmd.Env = append(hydraEnv(), "DSN="+h.dsn)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = procAttr()
	return cmd.Run()
}

func (h *Hydra) start() error {
	logf, err := os.OpenFile(h.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(logf, "==== %s starting hydra on public %d, admin %d\n", time.Now().Format(time.RFC3339Nano), h.publicPort, h.adminPort)
	cmd := exec.Command(h.bin, "serve", "all", "--dev", "--sqa-opt-out", "--config", h.config)
	cmd.Env = hydraEnv()
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return fmt.Errorf("start %s: %w", h.bin, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	h.mu.Lock()
	h.cmd, h.done, h.log = cmd, done, logf
	h.mu.Unlock()
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(hydraReadyTimeout)
	var lastErr error
	for time.Now().Before(deadline) {
		select {
		case <-done:
			return fmt.Errorf("hydra exited during startup (see log %s)", h.logPath)
		default:
		}
		// Hydra creates its signing keys when they are first asked for;
		// asking here keeps that (and its seconds of key generation)
		// out of the tests.
		var ready, meta, keys map[string]any
		if lastErr = getJSON(client, h.AdminURL()+"/health/ready", &ready); lastErr == nil {
			if lastErr = getJSON(client, h.Issuer()+"/.well-known/openid-configuration", &meta); lastErr == nil {
				if lastErr = getJSON(&http.Client{Timeout: 30 * time.Second}, h.Issuer()+"/.well-known/jwks.json", &keys); lastErr == nil {
					return nil
				}
			}
		}
		select {
		case <-done:
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("hydra not ready after %s: %v", hydraReadyTimeout, lastErr)
}

// Stop stops Hydra (SIGTERM, then SIGKILL after 10s) and waits for it.
func (h *Hydra) Stop() {
	h.mu.Lock()
	cmd, done, logf := h.cmd, h.done, h.log
	h.cmd, h.done, h.log = nil, nil, nil
	h.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
	fmt.Fprintf(logf, "==== %s hydra stopped (%v)\n", time.Now().Format(time.RFC3339Nano), cmd.ProcessState)
	_ = logf.Close()
}

// LogTail returns the last n lines of Hydra's log.
func (h *Hydra) LogTail(n int) string {
	b, err := os.ReadFile(h.logPath)
	if err != nil {
		return fmt.Sprintf("(read %s: %v)", h.logPath, err)
	}
	return tail(string(b), n)
}

// Issuer returns the issuer identifier (the public URL, no trailing
// slash).
func (h *Hydra) Issuer() string { return fmt.Sprintf("http://127.0.0.1:%d", h.publicPort) }

// AdminURL returns the base URL of Hydra's admin API.
func (h *Hydra) AdminURL() string { return fmt.Sprintf("http://127.0.0.1:%d", h.adminPort) }

// TokenURL returns the token endpoint.
func (h *Hydra) TokenURL() string { return h.Issuer() + "/oauth2/token" }

// IntrospectionURL returns the RFC 7662 introspection endpoint (on the
// admin API, which needs no client authentication).
func (h *Hydra) IntrospectionURL() string { return h.AdminURL() + "/admin/oauth2/introspect" }

// HydraClient is an OAuth client [Hydra.CreateClient] registers for the
// client credentials grant.
type HydraClient struct {
	// ID and Secret are the client's credentials.
	ID, Secret string
	// Scopes the client may ask for.
	Scopes []string
	// Audiences the client may ask for (Hydra puts the requested ones in
	// aud).
	Audiences []string
	// Claims the token hook adds to the client's access tokens (e.g.
	// {"org": "acme"}).
	Claims map[string]any
	// Opaque issues opaque access tokens (checked by introspection)
	// instead of JWTs.
	Opaque bool
	// AuthMethod is how the client authenticates at the token endpoint:
	// "client_secret_basic" (the default) or "client_secret_post".
	AuthMethod string
}

// CreateClient registers c through the admin API.
func (h *Hydra) CreateClient(t testing.TB, c HydraClient) {
	t.Helper()
	body := map[string]any{
		"client_id": c.ID, "client_secret": c.Secret, "grant_types": []string{"client_credentials"},
		"scope": strings.Join(c.Scopes, " "), "audience": c.Audiences, "token_endpoint_auth_method": "client_secret_basic",
	}
	if c.Opaque {
		body["access_token_strategy"] = "opaque"
	}
	if c.AuthMethod != "" {
		body["token_endpoint_auth_method"] = c.AuthMethod
	}
	h.mu.Lock()
	h.claims[c.ID] = c.Claims
	h.mu.Unlock()
	if status, out := h.admin(t, http.MethodPost, "/admin/clients", body); status != http.StatusCreated {
		t.Fatalf("create hydra client %s: %d %s", c.ID, status, out)
	}
}

// Token gets an access token for client id with the client credentials
// grant, asking for scopes and (Hydra's parameter; RFC 8707's resource
// is not read) audience.
func (h *Hydra) Token(t testing.TB, id, secret string, scopes []string, audience string) string {
	t.Helper()
	form := url.Values{"grant_type": {"client_credentials"}, "scope": {strings.Join(scopes, " ")}}
	if audience != "" {
		form.Set("audience", audience)
	}
	req, err := http.NewRequest(http.MethodPost, h.TokenURL(), strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth(id, secret)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("hydra token: %v", err)
	}
	defer resp.Body.Close()
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &tok) != nil || tok.AccessToken == "" {
		t.Fatalf("hydra token for %s: %d %s", id, resp.StatusCode, b)
	}
	return tok.AccessToken
}

// RotateKeys makes Hydra sign access tokens with a new key and stop
// publishing the ones it signed with before (rotated out: their tokens
// must be refused). It returns the new key's id.
func (h *Hydra) RotateKeys(t testing.TB) string {
	t.Helper()
	var before struct {
		Keys []struct {
			KID string `json:"kid"`
		} `json:"keys"`
	}
	status, out := h.admin(t, http.MethodGet, "/admin/keys/"+hydraAccessTokenKeys, nil)
	if status != http.StatusOK || json.Unmarshal(out, &before) != nil {
		t.Fatalf("hydra keys: %d %s", status, out)
	}
	kid := "rotated-" + RandomSuffix(4)
	if status, out := h.admin(t, http.MethodPost, "/admin/keys/"+hydraAccessTokenKeys, map[string]any{"alg": "RS256", "kid": kid, "use": "sig"}); status != http.StatusCreated {
		t.Fatalf("create hydra key: %d %s", status, out)
	}
	for _, k := range before.Keys {
		if status, out := h.admin(t, http.MethodDelete, "/admin/keys/"+hydraAccessTokenKeys+"/"+url.PathEscape(k.KID), nil); status != http.StatusNoContent {
			t.Fatalf("delete hydra key %s: %d %s", k.KID, status, out)
		}
	}
	return kid
}

// admin calls Hydra's admin API with a JSON body (nil: none).
func (h *Hydra) admin(t testing.TB, method, path string, body any) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, h.AdminURL()+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("hydra admin %s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// tokenHook is Hydra's token hook: it adds the claims registered for the
// token's client to its access token.
func (h *Hydra) tokenHook(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Request struct {
			ClientID string `json:"client_id"`
		} `json:"request"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	h.mu.Lock()
	claims := h.claims[req.Request.ClientID]
	h.mu.Unlock()
	if len(claims) == 0 {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"session": map[string]any{"access_token": claims}})
}

// AudienceTransport returns a RoundTripper that adds Hydra's audience
// parameter to client credentials token requests sent to this Hydra.
// MCP clients send RFC 8707's resource parameter (or, like go-sdk v1.8.0's
// client credentials handler, nothing); Hydra only grants audiences asked
// for as audience, so without this its tokens name no audience and a
// resource server that checks aud (as the MCP spec requires) refuses them.
func (h *Hydra) AudienceTransport(base http.RoundTripper, audience string) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if r.Method != http.MethodPost || r.URL.String() != h.TokenURL() || r.Body == nil {
			return base.RoundTrip(r)
		}
		b, err := io.ReadAll(r.Body)
		_ = r.Body.Close()
		if err != nil {
			return nil, err
		}
		form, err := url.ParseQuery(string(b))
		if err == nil && form.Get("grant_type") == "client_credentials" && !slices.Contains(form["audience"], audience) {
			form.Add("audience", audience)
			b = []byte(form.Encode())
		}
		r2 := r.Clone(r.Context())
		r2.Body = io.NopCloser(bytes.NewReader(b))
		r2.ContentLength = int64(len(b))
		r2.Header.Del("Content-Length")
		return base.RoundTrip(r2)
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
