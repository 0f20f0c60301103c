package app

import "testing"

func TestGCFor(t *testing.T) {
	const gib = 1 << 30
	for _, tc := range []struct {
		name, gogc, limit string
		mem               uint64
		want              GCSettings
	}{
		{"nothing set, memory known: raised target under a limit", "", "", 10 * gib, GCSettings{Percent: DefaultGCPercent, Limit: 9 * gib, Adaptive: true}},
		{"the operator's GOGC wins, the limit is still set", "100", "", 10 * gib, GCSettings{Limit: 9 * gib}},
		{"GOGC=off is the operator's too", "off", "", 10 * gib, GCSettings{Limit: 9 * gib}},
		{"the operator's GOMEMLIMIT wins; it bounds the raised target", "", "4GiB", 10 * gib, GCSettings{Percent: DefaultGCPercent, Adaptive: true}},
		{"both set: nothing changes", "200", "4GiB", 10 * gib, GCSettings{}},
		{"memory unknown and no limit: Go's defaults (no unbounded target)", "", "", 0, GCSettings{}},
		{"memory unknown, the operator's limit: the raised target is bounded", "", "2GiB", 0, GCSettings{Percent: DefaultGCPercent, Adaptive: true}},
		{"blank values count as unset", " ", "\t", 10 * gib, GCSettings{Percent: DefaultGCPercent, Limit: 9 * gib, Adaptive: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := GCFor(tc.gogc, tc.limit, tc.mem); got != tc.want {
				t.Fatalf("GCFor(%q, %q, %d) = %+v, want %+v", tc.gogc, tc.limit, tc.mem, got, tc.want)
			}
		})
	}
}
