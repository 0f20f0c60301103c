package auth_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/mcpgrain/mcpgrain/gateway/auth"
)

func ExampleAuthenticator_Authenticate() {
	keys, err := auth.ParseKeysEnv("alice-0123456789abcdef=alice:acme:admin")
	if err != nil {
		panic(err)
	}
	authn := auth.NewAuthenticator(keys, auth.AuthOptions{Realm: "mcpgrain"})

	for _, header := range []string{"Bearer alice-0123456789abcdef", "", "Bearer nobody-0123456789abcdef"} {
		r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
		if header != "" {
			r.Header.Set("Authorization", header)
		}
		p, err := authn.Authenticate(r)
		var ae *auth.Error
		if errors.As(err, &ae) {
			fmt.Println(ae.Status, ae.WWWAuthenticate)
			continue
		}
		fmt.Println(p.GetUser(), p.GetOrg(), p.GetRole())
	}
	// Output:
	// alice acme admin
	// 401 Bearer realm="mcpgrain"
	// 401 Bearer realm="mcpgrain", error="invalid_token", error_description="unknown bearer token"
}

func ExampleLimiter() {
	now := time.Unix(0, 0)
	lim := auth.NewLimiter(auth.LimiterOptions{Rate: 1, Burst: 2, Now: func() time.Time { return now }})
	keys, _ := auth.NewKeys(auth.Entry{Token: "alice-0123456789abcdef", User: "alice", Org: "acme"})
	p, _ := keys.Lookup("alice-0123456789abcdef")

	for range 3 {
		ok, retry := lim.Allow(p)
		fmt.Println(ok, retry)
	}
	now = now.Add(300 * time.Millisecond)
	_, retry := lim.Allow(p)
	fmt.Println("Retry-After:", auth.RetryAfterSeconds(retry))
	// Output:
	// true 0s
	// true 0s
	// false 1s
	// Retry-After: 1
}
