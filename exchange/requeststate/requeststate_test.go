package requeststate

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

var (
	key   = []byte("0123456789abcdef0123456789abcdef")
	other = []byte("fedcba9876543210fedcba9876543210")
	now   = time.Unix(2_000_000_000, 0)
)

func TestSignVerifyRoundTrip(t *testing.T) {
	c := Claims{Owner: "c-n1-3", User: "alice", Org: "acme", Expires: now.Add(time.Minute), Inner: "tool-state"}
	tok := Sign(key, c)
	got, err := Verify(key, tok, now)
	if err != nil {
		t.Fatal(err)
	}
	if got.Owner != c.Owner || got.User != c.User || got.Org != c.Org || got.Inner != c.Inner || !got.Expires.Equal(c.Expires) {
		t.Fatalf("claims %+v, want %+v", got, c)
	}
}

// signV1 is the earlier, readable token form (still opened for rolling
// upgrades).
func signV1(key []byte, c Claims) string {
	body, _ := json.Marshal(wire{Claims: c, Exp: c.Expires.Unix()})
	signed := prefixV1 + b64.EncodeToString(body)
	return signed + "." + b64.EncodeToString(macV1(key, signed))
}

// sealRaw seals an arbitrary payload as a v2 token.
func sealRaw(key, body []byte) string {
	g := aead(key)
	nonce := make([]byte, g.NonceSize())
	return prefixV2 + b64.EncodeToString(g.Seal(nonce, nonce, body, []byte(prefixV2)))
}

func TestTokensDoNotRevealTheirClaims(t *testing.T) {
	c := Claims{Owner: "c-n1-3", User: "alice", Org: "acme", Expires: now.Add(time.Minute), Inner: "exec_0123456789abcdef0123456789abcdef"}
	tok := Sign(key, c)
	raw, err := b64.DecodeString(strings.TrimPrefix(tok, prefixV2))
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{c.Owner, c.User, c.Org, c.Inner, "exec_"} {
		if strings.Contains(tok, secret) || strings.Contains(string(raw), secret) {
			t.Fatalf("token %q reveals %q", tok, secret)
		}
	}
	if Sign(key, c) == tok {
		t.Fatal("two tokens for the same claims are equal: the nonce is not fresh")
	}
}

func TestEarlierSignedTokensStillVerify(t *testing.T) {
	c := Claims{Owner: "c-n1-3", User: "alice", Org: "acme", Expires: now.Add(time.Minute), Inner: "tool-state"}
	got, err := Verify(key, signV1(key, c), now)
	if err != nil || got.Owner != c.Owner || got.Inner != c.Inner {
		t.Fatalf("v1 token: %+v, %v", got, err)
	}
}

func TestVerifyRejects(t *testing.T) {
	good := Sign(key, Claims{Owner: "c-1", User: "alice", Org: "acme", Expires: now.Add(time.Minute)})
	// Another base64url character inside the ciphertext (flipping a bit
	// could make it a character outside the alphabet, "-" or "_" say: a
	// malformed token, not a tampered one).
	flipped := []byte(good)
	i := len(prefixV2) + 20
	flipped[i] = map[bool]byte{true: 'B', false: 'A'}[flipped[i] == 'A']
	if string(flipped) == good {
		t.Fatal("bad test: flipped byte")
	}
	v1 := signV1(key, Claims{Owner: "c-1", User: "alice", Org: "acme", Expires: now.Add(time.Minute)})
	v1Body := strings.Split(v1, ".")[1]
	v1Flipped := []byte(v1)
	v1Flipped[len(prefixV1)+3] ^= 1
	cases := []struct {
		name  string
		token string
		want  error
	}{
		{"empty", "", ErrMalformed},
		{"unknown version", "v3." + strings.TrimPrefix(good, prefixV2), ErrMalformed},
		{"not base64", prefixV2 + "!!!", ErrMalformed},
		{"too short", prefixV2 + b64.EncodeToString([]byte("short")), ErrMalformed},
		{"tampered", string(flipped), ErrBadSignature},
		{"sealed with another key", Sign(other, Claims{Owner: "c-evil", User: "alice", Org: "acme", Expires: now.Add(time.Minute)}), ErrBadSignature},
		{"v1 signed with another key", signV1(other, Claims{Owner: "c-evil", User: "alice", Org: "acme", Expires: now.Add(time.Minute)}), ErrBadSignature},
		{"v1 tampered", string(v1Flipped), ErrBadSignature},
		{"v1 without signature", prefixV1 + v1Body, ErrMalformed},
		{"v1 bad base64 signature", prefixV1 + v1Body + ".!!!", ErrMalformed},
		{"expired", Sign(key, Claims{Owner: "c-1", Expires: now}), ErrExpired},
		{"v1 expired", signV1(key, Claims{Owner: "c-1", Expires: now}), ErrExpired},
		{"no owner", Sign(key, Claims{Expires: now.Add(time.Minute)}), ErrMalformed},
		{"huge", prefixV2 + strings.Repeat("A", MaxTokenLen), ErrMalformed},
		{"not json", sealRaw(key, []byte("nope")), ErrMalformed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Verify(key, tc.token, now)
			if !errors.Is(err, tc.want) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestCheckKey(t *testing.T) {
	if CheckKey(key[:31]) == nil || CheckKey(key) != nil {
		t.Fatal("CheckKey bounds wrong")
	}
}

func FuzzVerify(f *testing.F) {
	f.Add(Sign(key, Claims{Owner: "c-1", User: "u", Org: "o", Expires: now.Add(time.Hour), Inner: "x"}))
	f.Add(signV1(key, Claims{Owner: "c-1", User: "u", Org: "o", Expires: now.Add(time.Hour), Inner: "x"}))
	f.Add("v1..")
	f.Add("v1.e30.AAAA")
	f.Add("v2.")
	f.Add(sealRaw(key, []byte(`{"o":"c","e":1}`)))
	f.Fuzz(func(t *testing.T, tok string) {
		c, err := Verify(key, tok, now)
		if err == nil {
			// Anything that verifies must re-sign to an equivalent token.
			if _, err := Verify(key, Sign(key, c), now); err != nil {
				t.Fatalf("accepted %q but its claims do not re-verify: %v", tok, err)
			}
		}
	})
}
