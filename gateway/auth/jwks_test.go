package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// heldJWKS is an authorization server's key set endpoint whose answers the
// test releases one at a time: a fake transport, because the interleaving
// below (a token checked while the startup fetch is on the wire) cannot be
// produced on demand over a real connection.
type heldJWKS struct {
	asked   chan struct{}
	answers chan string
}

func (h *heldJWKS) RoundTrip(r *http.Request) (*http.Response, error) {
	h.asked <- struct{}{}
	body := <-h.answers
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(strings.NewReader(body)), Request: r}, nil
}

func keySetJSON(t *testing.T, kids ...string) string {
	t.Helper()
	var set jose.JSONWebKeySet
	for _, kid := range kids {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		set.Keys = append(set.Keys, jose.JSONWebKey{Key: &k.PublicKey, KeyID: kid, Algorithm: "ES256", Use: "sig"})
	}
	b, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A token whose key is newer than the fetch in flight when it arrives
// (the fetch at startup answering with the set from before the server
// created the key) is not refused: the lookup that waited for that fetch
// fetches once more.
func TestLookupDuringAnOlderFetchFetchesAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &heldJWKS{asked: make(chan struct{}), answers: make(chan string)}
		s := newKeySet("https://as.example", "https://as.example/jwks", &http.Client{Transport: h}, time.Now, time.Hour, 10*time.Second)
		ctx := context.Background()

		warmed := make(chan error, 1)
		go func() { _, err := s.lookup(ctx, ""); warmed <- err }() // the startup fetch
		<-h.asked
		found := make(chan []jose.JSONWebKey, 1)
		// A token signed with "new" comes while the startup fetch is on the
		// wire, and waits for it.
		go func() { keys, _ := s.lookup(ctx, "new"); found <- keys }()
		synctest.Wait()
		h.answers <- keySetJSON(t, "old")
		if err := <-warmed; err != nil {
			t.Fatal(err)
		}
		select {
		case <-h.asked:
			h.answers <- keySetJSON(t, "old", "new")
		case keys := <-found:
			t.Fatalf("the token's key was looked up in the set fetched before it existed only: %d keys", len(keys))
		}
		if keys := <-found; len(keys) != 1 || keys[0].KeyID != "new" {
			t.Fatalf("keys for the new kid: %+v", keys)
		}
	})
}
