package consul

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/mcpgrain/mcpgrain/cluster/membership"
)

func TestMemberFromEntry(t *testing.T) {
	tests := []struct {
		name  string
		entry *api.ServiceEntry
		want  membership.Member
		ok    bool
	}{
		{
			name: "full",
			entry: &api.ServiceEntry{Service: &api.AgentService{
				ID: "a", Address: "10.0.0.1", Port: 7000, Tags: []string{"tool", "mcp"},
				Meta: map[string]string{"http": "10.0.0.1:8080"},
			}},
			want: membership.Member{ID: "a", Address: "10.0.0.1:7000", Kinds: []string{"tool", "mcp"}, Meta: map[string]string{"http": "10.0.0.1:8080"}},
			ok:   true,
		},
		{
			name:  "empty tags and meta become nil",
			entry: &api.ServiceEntry{Service: &api.AgentService{ID: "a", Address: "h", Port: 1, Tags: []string{}, Meta: map[string]string{}}},
			want:  membership.Member{ID: "a", Address: "h:1"},
			ok:    true,
		},
		{
			name:  "ipv6 host",
			entry: &api.ServiceEntry{Service: &api.AgentService{ID: "a", Address: "::1", Port: 7000}},
			want:  membership.Member{ID: "a", Address: "[::1]:7000"},
			ok:    true,
		},
		{
			name: "node address when service has none",
			entry: &api.ServiceEntry{
				Node:    &api.Node{Address: "192.168.1.5"},
				Service: &api.AgentService{ID: "a", Port: 7000},
			},
			want: membership.Member{ID: "a", Address: "192.168.1.5:7000"},
			ok:   true,
		},
		{name: "nil entry", entry: nil},
		{name: "no service", entry: &api.ServiceEntry{}},
		{name: "no id", entry: &api.ServiceEntry{Service: &api.AgentService{Address: "h", Port: 1}}},
		{name: "no port", entry: &api.ServiceEntry{Service: &api.AgentService{ID: "a", Address: "h"}}},
		{name: "no address at all", entry: &api.ServiceEntry{Service: &api.AgentService{ID: "a", Port: 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := memberFromEntry(tt.entry)
			if ok != tt.ok || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("memberFromEntry = %+v, %v; want %+v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

// TestRegistrationRoundTrip checks that what Start registers converts back
// to exactly the member, the property the View comparison relies on.
func TestRegistrationRoundTrip(t *testing.T) {
	members := []membership.Member{
		{ID: "n1", Address: "127.0.0.1:7001", Kinds: []string{"z", "a", "a"}, Meta: map[string]string{"http": "127.0.0.1:8001", "zone_A-1": ""}},
		{ID: "n2", Address: "[fe80::1]:65535"},
		{ID: "node with spaces", Address: "host.example:1", Kinds: []string{"k"}},
	}
	for _, m := range members {
		if err := validateMember(m); err != nil {
			t.Fatalf("validateMember(%+v): %v", m, err)
		}
		r := registration("svc", m, 3*time.Second, time.Minute)
		if r.Name != "svc" || r.Check.CheckID != checkID(m.ID) || r.Check.TTL != "3s" || r.Check.Status != api.HealthPassing ||
			r.Check.DeregisterCriticalServiceAfter != "1m0s" {
			t.Fatalf("registration(%+v) = %+v / check %+v", m, r, r.Check)
		}
		e := &api.ServiceEntry{Service: &api.AgentService{ID: r.ID, Service: r.Name, Address: r.Address, Port: r.Port, Tags: r.Tags, Meta: r.Meta}}
		got, ok := memberFromEntry(e)
		if !ok || !reflect.DeepEqual(got, m) {
			t.Fatalf("round trip of %+v = %+v, %v", m, got, ok)
		}
	}
}

func TestValidateMember(t *testing.T) {
	long := strings.Repeat("x", 129)
	tooMany := map[string]string{}
	for i := range 65 {
		tooMany["k"+strings.Repeat("a", i)] = "v"
	}
	tests := []struct {
		name    string
		m       membership.Member
		wantErr string
	}{
		{"ok", membership.Member{ID: "a", Address: "h:1", Meta: map[string]string{"a-b_C9": "v"}}, ""},
		{"empty id", membership.Member{Address: "h:1"}, "ID is empty"},
		{"slash in id", membership.Member{ID: "a/b", Address: "h:1"}, "must not contain '/'"},
		{"no port", membership.Member{ID: "a", Address: "h"}, "not host:port"},
		{"no host", membership.Member{ID: "a", Address: ":1"}, "no host"},
		{"port zero", membership.Member{ID: "a", Address: "h:0"}, "port must be"},
		{"port not canonical", membership.Member{ID: "a", Address: "h:08"}, "port must be"},
		{"port name", membership.Member{ID: "a", Address: "h:http"}, "port must be"},
		{"bad meta key", membership.Member{ID: "a", Address: "h:1", Meta: map[string]string{"a.b": "v"}}, "only letters"},
		{"reserved meta key", membership.Member{ID: "a", Address: "h:1", Meta: map[string]string{"consul-x": "v"}}, "reserved"},
		{"long meta key", membership.Member{ID: "a", Address: "h:1", Meta: map[string]string{long: "v"}}, "longer than"},
		{"long meta value", membership.Member{ID: "a", Address: "h:1", Meta: map[string]string{"k": strings.Repeat("v", 513)}}, "longer than"},
		{"too much meta", membership.Member{ID: "a", Address: "h:1", Meta: tooMany}, "at most 64"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := validateMember(tt.m)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error = %v; want one containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestMergeHeld(t *testing.T) {
	a := membership.Member{ID: "a", Address: "h:1"}
	a2 := membership.Member{ID: "a", Address: "h:2"}
	b := membership.Member{ID: "b", Address: "h:3"}
	c := membership.Member{ID: "c", Address: "h:4"}
	v := membership.NewView
	tests := []struct {
		name      string
		published membership.View
		fresh     membership.View
		holding   bool
		want      membership.View
		wantHeld  []string
	}{
		{"not holding: fresh as is", v(a, b, c), v(a), false, v(a), nil},
		{"holding: missing kept", v(a, b, c), v(a), true, v(a, b, c), []string{"b", "c"}},
		{"holding: new member added at once", v(a), v(a, b), true, v(a, b), nil},
		{"holding: changed member taken from fresh", v(a, b), v(a2), true, v(a2, b), []string{"b"}},
		{"holding: empty fresh keeps everything", v(a, b), v(), true, v(a, b), []string{"a", "b"}},
		{"holding: nothing published", v(), v(c), true, v(c), nil},
		{"not holding: empty fresh empties", v(a, b), v(), false, v(), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, held := mergeHeld(tt.published, tt.fresh, tt.holding)
			if !got.Equal(tt.want) || !reflect.DeepEqual(held, tt.wantHeld) {
				t.Fatalf("mergeHeld = %+v held %v; want %+v held %v", got, held, tt.want, tt.wantHeld)
			}
		})
	}
}

func TestHoldDownWindow(t *testing.T) {
	t0 := time.Unix(1000, 0)
	h := holdDown{period: 4 * time.Second}
	if r := h.remaining(t0); r != 0 {
		t.Fatalf("fresh window remaining %s", r)
	}
	h.open(t0)
	if r := h.remaining(t0.Add(time.Second)); r != 3*time.Second {
		t.Fatalf("remaining after 1s = %s", r)
	}
	h.open(t0.Add(2 * time.Second)) // a second discontinuity extends it
	if r := h.remaining(t0.Add(5 * time.Second)); r != time.Second {
		t.Fatalf("remaining after extension = %s", r)
	}
	h.open(t0) // an older discontinuity never shortens it
	if r := h.remaining(t0.Add(5 * time.Second)); r != time.Second {
		t.Fatalf("remaining after older open = %s", r)
	}
	if r := h.remaining(t0.Add(7 * time.Second)); r != 0 {
		t.Fatalf("remaining after end = %s", r)
	}
}

func TestBackoffDelay(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		attempt int
		r       float64
		want    time.Duration
	}{
		{0, 0, 50 * ms},
		{0, 0.999999, 100 * ms},
		{1, 0, 100 * ms},
		{1, 0.5, 150 * ms},
		{3, 0, 400 * ms},
		{5, 0, 1600 * ms},
		{6, 0, 2500 * ms}, // 6.4 s capped to 5 s
		{6, 0.5, 3750 * ms},
		{100, 0.999999, 5000 * ms},
		{1 << 30, 0, 2500 * ms}, // no overflow
	}
	for _, tt := range tests {
		got := backoffDelay(tt.attempt, 100*ms, 5*time.Second, tt.r)
		if d := got - tt.want; d < -ms || d > ms {
			t.Errorf("backoffDelay(%d, r=%v) = %s; want %s", tt.attempt, tt.r, got, tt.want)
		}
	}
	b := backoff{base: 100 * ms, max: 5 * time.Second}
	for i := range 50 {
		if d := b.next(); d < 50*ms || d > 5*time.Second {
			t.Fatalf("backoff.next() #%d = %s out of bounds", i, d)
		}
	}
}

func TestConfigDefaults(t *testing.T) {
	c, err := Config{ClusterName: "c"}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if c.Address != DefaultAddress || c.TTL != 3*time.Second || c.RefreshInterval != time.Second ||
		c.DeregisterCriticalAfter != time.Minute || c.WatchWait != 5*time.Second || c.RemovalHoldDown != 6*time.Second ||
		c.Logger == nil || c.Now == nil {
		t.Fatalf("defaults = %+v", c)
	}
	c, err = Config{ClusterName: "c", TTL: 900 * time.Millisecond}.withDefaults()
	if err != nil || c.RefreshInterval != 300*time.Millisecond || c.RemovalHoldDown != 1800*time.Millisecond {
		t.Fatalf("derived defaults = %+v, %v", c, err)
	}
	bad := []struct {
		cfg  Config
		want string
	}{
		{Config{}, "ClusterName is required"},
		{Config{ClusterName: "a/b"}, "must not contain"},
		{Config{ClusterName: "c", TTL: -1}, "TTL must not be negative"},
		{Config{ClusterName: "c", TTL: time.Second, RefreshInterval: time.Second}, "shorter than TTL"},
		{Config{ClusterName: "c", WatchWait: 11 * time.Minute}, "maximum"},
		{Config{ClusterName: "c", RemovalHoldDown: -time.Second}, "RemovalHoldDown"},
	}
	for _, tt := range bad {
		if _, err := New(tt.cfg); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("New(%+v) error = %v; want one containing %q", tt.cfg, err, tt.want)
		}
	}
}
