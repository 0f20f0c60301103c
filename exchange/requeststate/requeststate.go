// Package requeststate seals and opens the requestState tokens mcpgrain
// hands to 2026-07-28 clients in input_required results (SEP-2322
// multi-round-trip requests).
//
// A client retries an input_required request with the requestState it got;
// the gateway must route that retry to the grain that owns the paused work,
// and must never resume anything for a forged, expired or foreign token. So
// a token names its owner grain and its principal, expires, and wraps the
// tool's own opaque state (for code mode: the execution id). It is sealed
// with AES-256-GCM under a key derived (HKDF-SHA256) from the state key
// every node shares:
//
//	v2.<base64url(12-byte nonce || AES-256-GCM(claims JSON, additional data "v2"))>
//
// so a client can neither read nor alter what it carries: the execution id
// inside is not an id the client can use anywhere else, and the owner and
// principal claims are authentic.
//
// Compatibility: tokens of the earlier form, signed but readable
// (v1.<base64url(JSON)>.<base64url(HMAC-SHA256)>), are still opened, so a
// rolling upgrade does not break the retries of pauses issued by nodes not
// yet upgraded; they expire 15 minutes after issue, and the v1 form can be
// dropped one release after every node seals v2 (added 2026-12).
package requeststate

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// MinKeyLen is the shortest accepted state key.
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

const (
	prefixV1 = "v1."
	prefixV2 = "v2."
	// sealInfo names the sealing key derived from the state key, so the
	// same state key can serve other purposes (the approval page's form
	// tokens) without the keys ever being equal.
	sealInfo = "mcpgrain requestState v2 AES-256-GCM"
)

var b64 = base64.RawURLEncoding

// CheckKey reports whether key is long enough to seal with.
func CheckKey(key []byte) error {
	if len(key) < MinKeyLen {
		return fmt.Errorf("requeststate: key must be at least %d bytes, got %d", MinKeyLen, len(key))
	}
	return nil
}

// aead returns the AES-256-GCM sealer of key.
func aead(key []byte) cipher.AEAD {
	k, err := hkdf.Key(sha256.New, key, nil, sealInfo, 32)
	if err != nil {
		panic(fmt.Sprintf("requeststate: derive key: %v", err)) // only for lengths HKDF-SHA256 cannot produce
	}
	block, err := aes.NewCipher(k)
	if err != nil {
		panic(fmt.Sprintf("requeststate: AES: %v", err)) // a 32-byte key is always valid
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		panic(fmt.Sprintf("requeststate: GCM: %v", err))
	}
	return gcm
}

// Sign returns the sealed token for c.
func Sign(key []byte, c Claims) string {
	body, _ := json.Marshal(wire{Claims: c, Exp: c.Expires.Unix()})
	g := aead(key)
	nonce := make([]byte, g.NonceSize(), g.NonceSize()+len(body)+g.Overhead())
	_, _ = rand.Read(nonce)
	return prefixV2 + b64.EncodeToString(g.Seal(nonce, nonce, body, []byte(prefixV2)))
}

// Verify opens token, checks its expiry at now and returns its claims.
// It does not check the principal; the caller compares User and Org.
func Verify(key []byte, token string, now time.Time) (Claims, error) {
	if len(token) > MaxTokenLen {
		return Claims{}, ErrMalformed
	}
	var body []byte
	var err error
	switch {
	case strings.HasPrefix(token, prefixV2):
		body, err = open(key, token[len(prefixV2):])
	case strings.HasPrefix(token, prefixV1):
		body, err = verifyV1(key, token)
	default:
		return Claims{}, ErrMalformed
	}
	if err != nil {
		return Claims{}, err
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

// open decrypts and authenticates a v2 token's payload.
func open(key []byte, payload string) ([]byte, error) {
	sealed, err := b64.DecodeString(payload)
	if err != nil {
		return nil, ErrMalformed
	}
	g := aead(key)
	if len(sealed) < g.NonceSize()+g.Overhead() {
		return nil, ErrMalformed
	}
	body, err := g.Open(nil, sealed[:g.NonceSize()], sealed[g.NonceSize():], []byte(prefixV2))
	if err != nil {
		return nil, ErrBadSignature
	}
	return body, nil
}

// verifyV1 checks a v1 token's HMAC and returns its (readable) payload.
func verifyV1(key []byte, token string) ([]byte, error) {
	dot := strings.LastIndexByte(token, '.')
	if dot <= len(prefixV1) {
		return nil, ErrMalformed
	}
	signed, sig := token[:dot], token[dot+1:]
	got, err := b64.DecodeString(sig)
	if err != nil {
		return nil, ErrMalformed
	}
	if !hmac.Equal(got, macV1(key, signed)) {
		return nil, ErrBadSignature
	}
	body, err := b64.DecodeString(signed[len(prefixV1):])
	if err != nil {
		return nil, ErrMalformed
	}
	return body, nil
}

func macV1(key []byte, signed string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(signed))
	return m.Sum(nil)
}
