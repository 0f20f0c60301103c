package requeststate

import (
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

func TestVerifyRejects(t *testing.T) {
	good := Sign(key, Claims{Owner: "c-1", User: "alice", Org: "acme", Expires: now.Add(time.Minute)})
	body := strings.Split(good, ".")[1]
	flipped := []byte(good)
	flipped[len(prefix)+3] ^= 1
	forgedOwner := Sign(other, Claims{Owner: "c-evil", User: "alice", Org: "acme", Expires: now.Add(time.Minute)})
	cases := []struct {
		name  string
		token string
		want  error
	}{
		{"empty", "", ErrMalformed},
		{"no prefix", "v2." + body + ".x", ErrMalformed},
		{"no signature", "v1." + body, ErrMalformed},
		{"bad base64 signature", "v1." + body + ".!!!", ErrMalformed},
		{"tampered claims", string(flipped), ErrBadSignature},
		{"signed with another key", forgedOwner, ErrBadSignature},
		{"expired", Sign(key, Claims{Owner: "c-1", Expires: now}), ErrExpired},
		{"no owner", Sign(key, Claims{Expires: now.Add(time.Minute)}), ErrMalformed},
		{"huge", "v1." + strings.Repeat("A", MaxTokenLen), ErrMalformed},
		{"not json", "v1." + b64.EncodeToString([]byte("nope")) + "." + b64.EncodeToString(mac(key, "v1."+b64.EncodeToString([]byte("nope")))), ErrMalformed},
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
	f.Add("v1..")
	f.Add("v1.e30.AAAA")
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
