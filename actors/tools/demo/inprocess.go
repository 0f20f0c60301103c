package demo

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
)

// Client returns an HTTP client that calls the API in this process, for an
// openapi source loaded from Spec(baseURL): a request's path is served
// with baseURL's path removed, and its context — with the [tools.Caller]
// the engine put on it — reaches the handler as it is. So code mode's
// calls carry the execution owner's organization without any header a
// client could forge (or that the node would have to strip).
func (a *API) Client(baseURL string) (*http.Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("demo: base URL %q: %w", baseURL, err)
	}
	prefix := strings.TrimSuffix(u.Path, "/")
	return &http.Client{Transport: inProcess{h: http.StripPrefix(prefix, a.Handler())}}, nil
}

// inProcess is an http.RoundTripper that serves each request with h.
type inProcess struct{ h http.Handler }

func (t inProcess) RoundTrip(req *http.Request) (*http.Response, error) {
	sr := req.Clone(req.Context())
	if sr.Body == nil {
		sr.Body = http.NoBody
	}
	sr.RequestURI = req.URL.RequestURI()
	sr.RemoteAddr = "in-process"
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, sr)
	if req.Body != nil {
		_ = req.Body.Close() // a RoundTripper closes the request body
	}
	resp := rec.Result()
	resp.Request = req
	return resp, nil
}
