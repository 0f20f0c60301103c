package chaos

import (
	"strings"
	"testing"
	"time"
)

func TestNotesOnce(t *testing.T) {
	at := time.Date(2026, 12, 7, 4, 0, 0, 0, time.UTC)
	add := func(n string, ok bool, notes ...string) NoteOp {
		return NoteOp{Add: n, OK: ok, Notes: notes, Return: at}
	}
	list := func(notes ...string) NoteOp { return NoteOp{OK: true, Notes: notes, Return: at} }
	lost := NoteOp{Return: at} // a list that got no answer
	for _, tc := range []struct {
		name string
		ops  []NoteOp
		want []string // substrings of the violations, in order; none: clean
	}{
		{"empty", nil, nil},
		{"acknowledged adds, then a list", []NoteOp{add("a", true, "a"), add("b", true, "a", "b"), list("a", "b")}, nil},
		{"a failed add never applied", []NoteOp{add("a", true, "a"), add("b", false), list("a"), add("c", true, "a", "c")}, nil},
		{"a failed add applied once", []NoteOp{add("a", true, "a"), add("b", false), list("a", "b"), add("c", true, "a", "b", "c")}, nil},
		{"a failed add seen late", []NoteOp{add("a", false), lost, list("a")}, nil},
		{"an unanswered list shows nothing", []NoteOp{add("a", true, "a"), lost, list("a")}, nil},
		{"an acknowledged add lost", []NoteOp{add("a", true, "a"), add("b", true, "a", "b"), list("a")},
			[]string{"note b, shown by request 2, is gone"}},
		{"an acknowledged add missing from its own answer", []NoteOp{add("a", true, "a"), add("b", true, "a")},
			[]string{"the acknowledged note b is not in its own answer"}},
		{"a note twice", []NoteOp{add("a", false), add("b", true, "a", "a", "b")}, []string{"note a shown twice"}},
		{"an acknowledged note twice", []NoteOp{add("a", true, "a"), list("a", "a")}, []string{"note a shown twice"}},
		{"a failed add seen, then gone", []NoteOp{add("a", false), list("a"), list()}, []string{"note a, shown by request 2, is gone"}},
		{"another session's note", []NoteOp{add("a", true, "a"), list("a", "w9-s1-n1")},
			[]string{"note w9-s1-n1, which this session had not sent"}},
		{"a note before it was sent", []NoteOp{list("b"), add("b", true, "b")}, []string{"note b, which this session had not sent"}},
		{"a later session starts empty", []NoteOp{list(), add("c", true, "c")}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := NotesOnce(NotesHistory{Session: "s", Ops: tc.ops})
			if len(got) != len(tc.want) {
				t.Fatalf("violations %q, want %d like %q", got, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("violation %d %q, want one containing %q", i, got[i], w)
				}
			}
		})
	}
}

func TestNotesCounts(t *testing.T) {
	hs := []NotesHistory{
		{Session: "1", Ops: []NoteOp{{Add: "a", OK: true, Notes: []string{"a"}}, {Add: "b"}, {Add: "c"}, {OK: true, Notes: []string{"a", "c"}}}},
		{Session: "2", Ops: []NoteOp{{Add: "d", OK: true, Notes: []string{"d"}}, {}}},
	}
	sent, acked, unknown, applied := NotesCounts(hs)
	if sent != 4 || acked != 2 || unknown != 2 || applied != 1 {
		t.Fatalf("sent %d acked %d unknown %d applied %d, want 4 2 2 1", sent, acked, unknown, applied)
	}
}
