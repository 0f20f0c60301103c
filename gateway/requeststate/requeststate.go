// Package requeststate signs and verifies the requestState tokens mcpgrain
// hands to 2026-07-28 clients in input_required results (SEP-2322
// multi-round-trip requests).
//
// A client retries an input_required request with the requestState it got;
// the gateway must route that retry to the grain that owns the paused work,
// and must never resume anything for a forged, expired or foreign token. So
// a token names its owner grain and its principal, expires, wraps the
// tool's own opaque state, and is authenticated with HMAC-SHA256 under a key
// every node shares:
//
//	v1.<base64url(JSON claims)>.<base64url(HMAC-SHA256(key, "v1." + claims))>
//
// The claims are not secret (clients can decode them); they are only
// tamper-proof.
//
// Usage:
//
//	tok := requeststate.Sign(key, requeststate.Claims{Owner: "c-n1-3", User: "alice", Org: "acme", Expires: exp, Inner: toolState})
//	c, err := requeststate.Verify(key, tok, time.Now()) // errors.Is(err, requeststate.ErrExpired), …
package requeststate

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// MinKeyLen is the shortest accepted signing key.
const MinKeyLen = 32

// MaxTokenLen bounds a token the gateway will parse.
const MaxTokenLen = 64 << 10

// Errors returned by [Verify]; all wrap [ErrInvalid].
var (
	ErrInvalid      = errors.New("invalid requestState")
	ErrMalformed    = fmt.Errorf("%w: malformed", ErrInvalid)
	ErrBadSignature = fmt.Errorf("%w: bad signature", ErrInvalid)
	ErrExpired      = fmt.Errorf("%w: expired", ErrInvalid)
)

// Claims is what a token asserts.
type Claims struct {
	// Owner is the identity of the grain that owns the paused request.
	Owner string `json:"o"`
	// User and Org bind the token to the principal it was issued to.
	User string `json:"u"`
	Org  string `json:"g"`
	// Expires is when the token stops being accepted.
	Expires time.Time `json:"-"`
	// Inner is the tool's own requestState, handed back to it on retry.
	Inner string `json:"s,omitempty"`
}

type wire struct {
	Claims
	Exp int64 `json:"e"`
}

const prefix = "v1."

var b64 = base64.RawURLEncoding

// CheckKey reports whether key is long enough to sign with.
func CheckKey(key []byte) error {
	if len(key) < MinKeyLen {
		return fmt.Errorf("requeststate: key must be at least %d bytes, got %d", MinKeyLen, len(key))
	}
	return nil
}

func mac(key []byte, signed string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(signed))
	return m.Sum(nil)
}

// Sign returns the token for c.
func Sign(key []byte, c Claims) string {
	body, _ := json.Marshal(wire{Claims: c, Exp: c.Expires.Unix()})
	signed := prefix + b64.EncodeToString(body)
	return signed + "." + b64.EncodeToString(mac(key, signed))
}

// Verify checks token's signature and expiry at now and returns its claims.
// It does not check the principal; the caller compares User and Org.
func Verify(key []byte, token string, now time.Time) (Claims, error) {
	if len(token) > MaxTokenLen || !strings.HasPrefix(token, prefix) {
		return Claims{}, ErrMalformed
	}
	dot := strings.LastIndexByte(token, '.')
	if dot <= len(prefix) {
		return Claims{}, ErrMalformed
	}
	signed, sig := token[:dot], token[dot+1:]
	got, err := b64.DecodeString(sig)
	if err != nil {
		return Claims{}, ErrMalformed
	}
	if !hmac.Equal(got, mac(key, signed)) {
		return Claims{}, ErrBadSignature
	}
	body, err := b64.DecodeString(signed[len(prefix):])
	if err != nil {
		return Claims{}, ErrMalformed
	}
	var w wire
	if err := json.Unmarshal(body, &w); err != nil || w.Owner == "" {
		return Claims{}, ErrMalformed
	}
	w.Expires = time.Unix(w.Exp, 0)
	if !now.Before(w.Expires) {
		return Claims{}, ErrExpired
	}
	return w.Claims, nil
}
