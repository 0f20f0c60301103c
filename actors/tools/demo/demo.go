// Package demo is a small in-memory to-do HTTP API and its OpenAPI 3.0
// document. `mcpgrain dev` serves it so that code mode has a tool source to
// call before any real one is configured, and tests use it as a real HTTP
// upstream for the openapi source.
//
// The operations are:
//
//	listTodos  GET    /todos?done=&limit=  200 [Todo...]
//	getTodo    GET    /todos/{id}          200 Todo, 404
//	createTodo POST   /todos {title}       201 Todo, 400
//	deleteTodo DELETE /todos/{id}          204, 404
//
// Errors are JSON objects {"error": "<message>"}. A title is required, at
// most 200 characters, and is stored with surrounding space trimmed.
//
// Serve [API.Handler] (an httptest server will do) and load [API.Spec] with
// the openapi source: code then calls tools.demo.createTodo({title: "x"}),
// the arguments being the request body. See the package example.
//
// An API from [NewAPI] keeps one list for every request: a plain upstream,
// as tests use it. `mcpgrain dev` serves one from [NewOrgAPI]: one list
// per organization, the organization of the [tools.Caller] on the
// request's context; a request without one is refused (401). Nothing a
// client sends names the organization: the node authenticates an HTTP
// request to /demo/ and puts its principal there, and code mode's calls
// reach the API in process ([API.Client]) with the execution's owner,
// which the engine puts on every tool call's context.
package demo

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/mcpgrain/mcpgrain/actors/tools"
)

// MaxTitleLen is the longest title, in characters, createTodo accepts.
const MaxTitleLen = 200

// maxBodyBytes bounds a createTodo request body.
const maxBodyBytes = 64 << 10

// Todo is one to-do item as the API returns it.
type Todo struct {
	// ID is the server-assigned identifier, a decimal string ("1", "2", ...).
	ID string `json:"id"`
	// Title is what to do.
	Title string `json:"title"`
	// Done reports whether the item is done. New items are not.
	Done bool `json:"done"`
	// CreatedAt is when the item was created, in UTC.
	CreatedAt time.Time `json:"createdAt"`
}

// API is the in-memory to-do API. It is safe for concurrent use.
type API struct {
	perOrg bool

	mu    sync.Mutex
	lists map[string]*list // by organization ("": the one list of NewAPI)
}

// list is one organization's to-dos.
type list struct {
	todos  map[string]Todo
	order  []string // ids in creation order
	nextID int
}

// NewAPI returns an empty to-do API with one list for every request.
func NewAPI() *API {
	return &API{lists: map[string]*list{}}
}

// NewOrgAPI returns an empty to-do API with one list per organization:
// the organization of the [tools.Caller] on a request's context. A request
// without a caller of an organization gets 401.
func NewOrgAPI() *API {
	return &API{perOrg: true, lists: map[string]*list{}}
}

// Todos returns a copy of the items of an API from NewAPI in creation
// order (of one from NewOrgAPI: none; see TodosOf).
func (a *API) Todos() []Todo { return a.TodosOf("") }

// TodosOf returns a copy of organization org's items in creation order.
func (a *API) TodosOf(org string) []Todo {
	a.mu.Lock()
	defer a.mu.Unlock()
	l := a.lists[org]
	if l == nil {
		return []Todo{}
	}
	out := make([]Todo, 0, len(l.order))
	for _, id := range l.order {
		out = append(out, l.todos[id])
	}
	return out
}

// Handler returns the API's HTTP handler, serving the paths of Spec at the
// root ("/todos", "/todos/{id}").
func (a *API) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /todos", a.list)
	mux.HandleFunc("POST /todos", a.create)
	mux.HandleFunc("GET /todos/{id}", a.get)
	mux.HandleFunc("DELETE /todos/{id}", a.delete)
	return mux
}

// org is the organization whose list r works on ("" for an API from
// NewAPI); without one, it answers 401 and ok is false.
func (a *API) org(w http.ResponseWriter, r *http.Request) (org string, ok bool) {
	if !a.perOrg {
		return "", true
	}
	c, found := tools.CallerFrom(r.Context())
	if !found || c.Org == "" {
		writeError(w, http.StatusUnauthorized, "unauthenticated: the to-do list is per organization; send the caller's bearer token")
		return "", false
	}
	return c.Org, true
}

func (a *API) list(w http.ResponseWriter, r *http.Request) {
	org, ok := a.org(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	var done *bool
	if s := q.Get("done"); s != "" {
		b, err := strconv.ParseBool(s)
		if err != nil {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("done: want true or false, got %q", s))
			return
		}
		done = &b
	}
	limit := 100
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 100 {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("limit: want an integer from 1 to 100, got %q", s))
			return
		}
		limit = n
	}
	out := []Todo{}
	for _, t := range a.TodosOf(org) {
		if done != nil && t.Done != *done {
			continue
		}
		if len(out) == limit {
			break
		}
		out = append(out, t)
	}
	writeJSON(w, http.StatusOK, out)
}

func (a *API) get(w http.ResponseWriter, r *http.Request) {
	org, ok := a.org(w, r)
	if !ok {
		return
	}
	a.mu.Lock()
	t, ok := a.lists[org].find(r.PathValue("id"))
	a.mu.Unlock()
	if !ok {
		writeError(w, http.StatusNotFound, "not found")
		return
	}
	writeJSON(w, http.StatusOK, t)
}

func (a *API) create(w http.ResponseWriter, r *http.Request) {
	org, ok := a.org(w, r)
	if !ok {
		return
	}
	var in struct {
		Title *string `json:"title"`
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, "request body too large")
			return
		}
		writeError(w, http.StatusBadRequest, "invalid JSON body: "+err.Error())
		return
	}
	if dec.Decode(new(json.RawMessage)) != io.EOF {
		writeError(w, http.StatusBadRequest, "invalid JSON body: trailing data")
		return
	}
	if in.Title == nil {
		writeError(w, http.StatusBadRequest, "title is required")
		return
	}
	title := strings.TrimSpace(*in.Title)
	switch n := utf8.RuneCountInString(title); {
	case n == 0:
		writeError(w, http.StatusBadRequest, "title must not be empty")
		return
	case n > MaxTitleLen:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("title is %d characters; the limit is %d", n, MaxTitleLen))
		return
	}
	a.mu.Lock()
	l := a.lists[org]
	if l == nil {
		l = &list{todos: map[string]Todo{}, nextID: 1}
		a.lists[org] = l
	}
	t := Todo{ID: strconv.Itoa(l.nextID), Title: title, CreatedAt: time.Now().UTC()}
	l.nextID++
	l.todos[t.ID] = t
	l.order = append(l.order, t.ID)
	a.mu.Unlock()
	w.Header().Set("Location", "/todos/"+t.ID)
	writeJSON(w, http.StatusCreated, t)
}

func (a *API) delete(w http.ResponseWriter, r *http.Request) {
	org, ok := a.org(w, r)
	if !ok {
		return
	}
	id := r.PathValue("id")
	a.mu.Lock()
	ok = a.lists[org].remove(id)
	a.mu.Unlock()
	if !ok {
		writeError(w, http.StatusNotFound, "not found")
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// find returns the item with id (none in a nil list).
func (l *list) find(id string) (Todo, bool) {
	if l == nil {
		return Todo{}, false
	}
	t, ok := l.todos[id]
	return t, ok
}

// remove deletes the item with id, reporting whether there was one (none
// in a nil list).
func (l *list) remove(id string) bool {
	if _, ok := l.find(id); !ok {
		return false
	}
	delete(l.todos, id)
	for i, o := range l.order {
		if o == id {
			l.order = append(l.order[:i], l.order[i+1:]...)
			break
		}
	}
	return true
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}
