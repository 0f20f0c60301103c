package auth

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// Roles a key may grant. Every role sees its organization's paused
// executions; the roles differ in what they may do:
const (
	// RoleAdmin decides paused executions whatever --approvers says, and
	// is the only role the /debug/ routes (profiler, probe) answer.
	RoleAdmin = "admin"
	// RoleMember decides paused executions unless --approvers admin. It
	// is the role of an entry that names none.
	RoleMember = "member"
	// RoleViewer sees paused executions (list, show, watch, the page) and
	// never decides them.
	RoleViewer = "viewer"
)

// MinTokenLength is the shortest bearer token [NewKeys] accepts, in bytes.
const MinTokenLength = 16

// TokenPrefix starts every token made by [GenerateToken], so leaked tokens
// are easy to recognize (e.g. by secret scanners).
const TokenPrefix = "mcpg_"

// EnvVar is the environment variable [ParseKeysEnv]'s format is named after.
const EnvVar = "MCPGRAIN_KEYS"

// maxKeysFileSize bounds what [LoadKeysFile] reads.
const maxKeysFileSize = 16 << 20

// Entry is one configured bearer token and the principal it authenticates.
type Entry struct {
	// Token is the bearer token: at least [MinTokenLength] characters of
	// RFC 6750 b64token syntax (A-Z a-z 0-9 - . _ ~ + /, then optional
	// trailing '=').
	Token string
	// User is the user id (required).
	User string
	// Org is the organization id (required).
	Org string
	// Role is [RoleAdmin], [RoleMember] or [RoleViewer]; empty means
	// [RoleMember].
	Role string
}

// Keys maps bearer tokens to principals. It stores only SHA-256 digests of
// the tokens, never the tokens, and looks a token up by its digest, so a
// lookup's timing does not depend on how much of a token matches a
// configured one.
//
// A Keys is immutable and safe for concurrent use. The nil *Keys is empty.
type Keys struct {
	byDigest map[[sha256.Size]byte]keyEntry
}

// keyEntry is what Keys holds per token.
type keyEntry struct {
	user, org, role string
	// p is the principal Lookup returns: one message for all the lookups
	// of the token (see Lookup).
	p *pb.Principal
	// origin names where the entry was configured, for error messages
	// (e.g. `MCPGRAIN_KEYS entry 2`); never the token.
	origin string
}

func (e keyEntry) samePrincipal(o keyEntry) bool {
	return e.user == o.user && e.org == o.org && e.role == o.role
}

func (e keyEntry) describe() string {
	return fmt.Sprintf("%s (user %q, org %q, role %q)", e.origin, e.user, e.org, e.role)
}

// NewKeys validates entries and returns them as Keys. Every entry needs a
// token of at least [MinTokenLength] bearer-token characters, a user and an
// org; the role must be empty, [RoleAdmin], [RoleMember] or [RoleViewer]. No token may
// appear twice. Errors name the offending entry by its index in entries and
// never contain the token.
func NewKeys(entries ...Entry) (*Keys, error) {
	return buildKeys(entries, func(i int) string { return fmt.Sprintf("entries[%d]", i) })
}

func buildKeys(entries []Entry, origin func(i int) string) (*Keys, error) {
	k := &Keys{byDigest: make(map[[sha256.Size]byte]keyEntry, len(entries))}
	for i, e := range entries {
		ke, err := validateEntry(e)
		if err != nil {
			return nil, fmt.Errorf("auth: %s: %w", origin(i), err)
		}
		ke.origin = origin(i)
		d := sha256.Sum256([]byte(e.Token))
		if prev, dup := k.byDigest[d]; dup {
			return nil, fmt.Errorf("auth: %s: duplicate token (also used by %s)", ke.origin, prev.origin)
		}
		k.byDigest[d] = ke
	}
	return k, nil
}

func validateEntry(e Entry) (keyEntry, error) {
	switch {
	case e.Token == "":
		return keyEntry{}, errors.New("token is empty")
	case len(e.Token) < MinTokenLength:
		return keyEntry{}, fmt.Errorf("token is shorter than %d characters", MinTokenLength)
	case !isBearerToken(e.Token):
		return keyEntry{}, errors.New("token contains characters a bearer token cannot (allowed: A-Z a-z 0-9 - . _ ~ + / and trailing =)")
	}
	for _, f := range [2][2]string{{"user", e.User}, {"org", e.Org}} {
		if err := validateName(f[0], f[1]); err != nil {
			return keyEntry{}, err
		}
		if IsQualifiedName(f[1]) {
			return keyEntry{}, fmt.Errorf("%s %q has the form <issuer>#<name>, reserved for the principals of OAuth issuers", f[0], f[1])
		}
	}
	role := e.Role
	switch role {
	case "":
		role = RoleMember
	case RoleAdmin, RoleMember, RoleViewer:
	default:
		return keyEntry{}, fmt.Errorf("role %q is not %q, %q or %q", role, RoleAdmin, RoleMember, RoleViewer)
	}
	return keyEntry{user: e.User, org: e.Org, role: role, p: &pb.Principal{User: e.User, Org: e.Org, Role: role}}, nil
}

func validateName(field, v string) error {
	switch {
	case v == "":
		return fmt.Errorf("%s is empty", field)
	case !utf8.ValidString(v):
		return fmt.Errorf("%s is not valid UTF-8", field)
	case strings.TrimSpace(v) != v:
		return fmt.Errorf("%s %q has leading or trailing whitespace", field, v)
	case strings.IndexFunc(v, unicode.IsControl) >= 0:
		return fmt.Errorf("%s %q contains control characters", field, v)
	}
	return nil
}

// isBearerToken reports whether s matches RFC 6750's b64token:
// 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"=".
func isBearerToken(s string) bool {
	body := strings.TrimRight(s, "=")
	if body == "" {
		return false
	}
	for i := 0; i < len(body); i++ {
		c := body[i]
		switch {
		case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		case c == '-', c == '.', c == '_', c == '~', c == '+', c == '/':
		default:
			return false
		}
	}
	return true
}

// keysFile is the JSON layout [LoadKeysFile] reads.
type keysFile struct {
	Keys []json.RawMessage `json:"keys"`
}

type keysFileEntry struct {
	Token string `json:"token"`
	User  string `json:"user"`
	Org   string `json:"org"`
	Role  string `json:"role"`
}

// LoadKeysFile reads Keys from a JSON file:
//
//	{"keys": [{"token": "mcpg_...", "user": "alice", "org": "acme", "role": "admin"}]}
//
// "role" is optional ([RoleMember] when absent); unknown fields are errors.
// Because the file holds secrets, it must not be readable by others: a file
// whose mode grants "other" read permission is rejected (chmod 600 it). The
// check is skipped on Windows, which has no such mode bits. Errors name the
// path and, for a bad entry, its index (keys[i]); they never contain a token.
func LoadKeysFile(path string) (*Keys, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("auth: keys file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("auth: keys file: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("auth: keys file %s: not a regular file", path)
	}
	if runtime.GOOS != "windows" && fi.Mode().Perm()&0o004 != 0 {
		return nil, fmt.Errorf("auth: keys file %s is readable by every user (mode %04o); restrict it with: chmod 600 %s", path, fi.Mode().Perm(), path)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxKeysFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("auth: keys file %s: %w", path, err)
	}
	if len(data) > maxKeysFileSize {
		return nil, fmt.Errorf("auth: keys file %s: larger than %d bytes", path, maxKeysFileSize)
	}
	return parseKeysFile(path, data)
}

func parseKeysFile(path string, data []byte) (*Keys, error) {
	var kf keysFile
	if err := decodeStrict(data, &kf); err != nil {
		return nil, fmt.Errorf("auth: keys file %s: %s", path, describeJSONError(data, err, true))
	}
	entries := make([]Entry, len(kf.Keys))
	for i, raw := range kf.Keys {
		var fe keysFileEntry
		if err := decodeStrict(raw, &fe); err != nil {
			return nil, fmt.Errorf("auth: keys file %s: keys[%d]: %s", path, i, describeJSONError(raw, err, false))
		}
		entries[i] = Entry(fe)
	}
	return buildKeys(entries, func(i int) string { return fmt.Sprintf("keys file %s: keys[%d]", path, i) })
}

// decodeStrict decodes exactly one JSON value into v, rejecting unknown
// fields and trailing data.
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("unexpected data after the top-level JSON value")
	}
	return nil
}

// describeJSONError turns a decoding error into a message. With withPos it
// adds the line and column of errors that have an offset into data.
func describeJSONError(data []byte, err error, withPos bool) string {
	var off int64 = -1
	var msg string
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		off, msg = syn.Offset, "invalid JSON: "+syn.Error()
	case errors.As(err, &typ):
		off = typ.Offset
		want := "a JSON object"
		switch typ.Type.Kind() {
		case reflect.String:
			want = "a string"
		case reflect.Slice:
			want = "an array"
		}
		if typ.Field == "" {
			msg = fmt.Sprintf("want %s, got JSON %s", want, typ.Value)
		} else {
			msg = fmt.Sprintf("field %q: want %s, got JSON %s", typ.Field, want, typ.Value)
		}
	case errors.Is(err, io.EOF):
		return "empty (want a JSON object with a \"keys\" array)"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "invalid JSON: unexpected end of input"
	default:
		return strings.TrimPrefix(err.Error(), "json: ")
	}
	if !withPos || off < 0 {
		return msg
	}
	// The offset counts the bytes read up to and including the offending one.
	at := int(max(min(off, int64(len(data)))-1, 0))
	before := data[:at]
	line := bytes.Count(before, []byte("\n")) + 1
	col := at - bytes.LastIndexByte(before, '\n')
	return fmt.Sprintf("line %d, column %d: %s", line, col, msg)
}

// ParseKeysEnv parses Keys from the [EnvVar] (MCPGRAIN_KEYS) format:
// semicolon-separated entries of the form token=user:org:role, e.g.
//
//	mcpg_aaaa...=alice:acme:admin;mcpg_bbbb...=bob:acme:member
//
// The token ends at the entry's last '=' (so it may end in '=' padding, and
// user, org and role cannot contain '='); user, org and role are separated by
// ':' and cannot contain it. The role may be empty ("tok=bob:acme:") to mean
// [RoleMember]. Whitespace around entries is ignored, as are empty entries,
// so a trailing ';' or one entry per line is fine. An empty v yields empty
// Keys. Errors name the entry by its 1-based position and never contain the
// token.
func ParseKeysEnv(v string) (*Keys, error) {
	var entries []Entry
	var positions []int
	for i, raw := range strings.Split(v, ";") {
		pos := i + 1
		raw = strings.TrimSpace(raw)
		if raw == "" {
			continue
		}
		eq := strings.LastIndexByte(raw, '=')
		if eq < 0 {
			return nil, fmt.Errorf("auth: %s entry %d: missing '=' (want token=user:org:role)", EnvVar, pos)
		}
		fields := strings.Split(raw[eq+1:], ":")
		if len(fields) != 3 {
			return nil, fmt.Errorf("auth: %s entry %d: want token=user:org:role, got %d ':'-separated field(s) after '='", EnvVar, pos, len(fields))
		}
		entries = append(entries, Entry{Token: raw[:eq], User: fields[0], Org: fields[1], Role: fields[2]})
		positions = append(positions, pos)
	}
	return buildKeys(entries, func(i int) string { return fmt.Sprintf("%s entry %d", EnvVar, positions[i]) })
}

// Merge returns Keys holding the entries of both k and o; neither is
// modified. A token present in both is an error unless both map it to the
// same principal. Either may be nil.
func (k *Keys) Merge(o *Keys) (*Keys, error) {
	m := &Keys{byDigest: make(map[[sha256.Size]byte]keyEntry, k.Len()+o.Len())}
	if k != nil {
		for d, e := range k.byDigest {
			m.byDigest[d] = e
		}
	}
	var conflicts []string
	if o != nil {
		for d, e := range o.byDigest {
			prev, dup := m.byDigest[d]
			switch {
			case !dup:
				m.byDigest[d] = e
			case !prev.samePrincipal(e):
				conflicts = append(conflicts, fmt.Sprintf("%s and %s", prev.describe(), e.describe()))
			}
		}
	}
	if len(conflicts) > 0 {
		slices.Sort(conflicts)
		msg := "auth: the same token maps to different principals in " + conflicts[0]
		if len(conflicts) > 1 {
			msg += fmt.Sprintf(" (and %d more conflicting token(s))", len(conflicts)-1)
		}
		return nil, errors.New(msg)
	}
	return m, nil
}

// Lookup returns the principal token authenticates and whether the token
// is known. The message is the token's, shared by every lookup of it: the
// caller may keep it and must not modify it (principals are never changed
// in place; a session keeps the principal that created it, and one
// message a token instead of one a lookup was ~0.1 KB of every resident
// session).
func (k *Keys) Lookup(token string) (*pb.Principal, bool) {
	if k == nil || token == "" {
		return nil, false
	}
	e, ok := k.byDigest[sha256.Sum256([]byte(token))]
	if !ok {
		return nil, false
	}
	return e.p, true
}

// Len returns the number of tokens.
func (k *Keys) Len() int {
	if k == nil {
		return 0
	}
	return len(k.byDigest)
}

// GenerateToken returns a new random bearer token: [TokenPrefix] followed by
// 32 bytes from crypto/rand in unpadded base64url (48 characters in all).
func GenerateToken() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("auth: generate token: %w", err)
	}
	return TokenPrefix + base64.RawURLEncoding.EncodeToString(b[:]), nil
}
