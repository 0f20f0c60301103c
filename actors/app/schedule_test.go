package app

import (
	"strings"
	"testing"
)

func TestCheckSchedule(t *testing.T) {
	for _, tc := range []struct {
		s  Scheduled
		ok bool
	}{
		{Scheduled{Name: "remind"}, true},
		{Scheduled{Name: "remind", Key: "tea-1:a.b_c@d"}, true},
		{Scheduled{Name: "remind", Payload: make([]byte, MaxSchedulePayload)}, true},
		{Scheduled{}, false},
		{Scheduled{Name: "remind", Payload: make([]byte, MaxSchedulePayload+1)}, false},
		{Scheduled{Name: "remind", Key: "a/b"}, false},
		{Scheduled{Name: "remind", Key: "a b"}, false},
		{Scheduled{Name: "remind", Key: strings.Repeat("k", MaxScheduleKey+1)}, false},
	} {
		if err := CheckSchedule(tc.s); (err == nil) != tc.ok {
			t.Errorf("CheckSchedule(name %q, key %q, %d bytes) = %v, want ok %v", tc.s.Name, tc.s.Key, len(tc.s.Payload), err, tc.ok)
		}
	}
}
