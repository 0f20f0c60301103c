package chaos

import (
	"fmt"
	"slices"
	"time"
)

// The notes worker's checker: an SDK program's durable per-session State
// (examples/notes: add_note, list_notes) over faults. Each worker session
// adds notes with ids unique in the run, one request at a time, and reads
// them back; every answer of add_note and list_notes shows the session's
// notes. What a client saw is held to exactly-once visible effects:
//
//   - an acknowledged add shows its note in its own answer and in every
//     later answer of the session: no acknowledged write is lost;
//   - no answer shows a note twice: an add whose outcome is unknown (it
//     failed, timed out or was cut by the end of the run) is applied at
//     most once, an acknowledged one exactly once;
//   - a note an answer showed is shown by every later answer of the
//     session: the notes never go backwards, whichever node owns the
//     session now;
//   - an answer shows only notes the session had sent by then: nothing of
//     another session, nothing before it was sent.
//
// A session's deletion ends its history: its notes go with it, and the
// worker's next session starts with none (the last rule holds it to
// that). A session in use does not expire during a run; one that ended
// otherwise is lost, which the harness reports as a violation of its own.

// NoteOp is one request of a notes session, in the session's order (the
// worker sends the next only after this one was answered or given up).
type NoteOp struct {
	// Add is the note an add_note sent; "" for a list_notes.
	Add string
	// OK is set when the request was answered with the session's notes
	// (an acknowledged add, an answered list). An add that is not OK has
	// an unknown outcome: it may have been applied.
	OK bool
	// Notes is what an OK answer showed: the session's notes, oldest
	// first.
	Notes []string
	// Return is when the answer came (or the request was given up).
	Return time.Time
}

// NotesHistory is what a client saw of one notes session.
type NotesHistory struct {
	// Session names the session in reports.
	Session string
	// Ops are the session's requests in the order sent, the harness's
	// final reads last.
	Ops []NoteOp
}

// NotesOnce checks one session's history against the rules above and
// returns its violations.
func NotesOnce(h NotesHistory) []string {
	var out []string
	sent := map[string]bool{} // notes sent up to the current request
	var shown []string        // notes shown by some earlier answer, in order first shown
	shownAt := map[string]int{}
	for i, op := range h.Ops {
		where := fmt.Sprintf("notes session %s, request %d (%s at %s)", h.Session, i+1, op.describe(), clock(op.Return))
		if op.Add != "" {
			sent[op.Add] = true
		}
		if !op.OK {
			continue
		}
		out = append(out, listViolations(where, op, sent)...)
		for _, n := range shown {
			if !slices.Contains(op.Notes, n) {
				out = append(out, fmt.Sprintf("%s: note %s, shown by request %d, is gone", where, n, shownAt[n]+1))
			}
		}
		for _, n := range op.Notes {
			if _, ok := shownAt[n]; !ok && sent[n] {
				shownAt[n] = i
				shown = append(shown, n)
			}
		}
	}
	return out
}

// listViolations checks one answer on its own: its own note (an
// acknowledged add), no note twice, no note the session had not sent.
func listViolations(where string, op NoteOp, sent map[string]bool) []string {
	var out []string
	if op.Add != "" && !slices.Contains(op.Notes, op.Add) {
		out = append(out, fmt.Sprintf("%s: the acknowledged note %s is not in its own answer", where, op.Add))
	}
	seen := map[string]bool{}
	for _, n := range op.Notes {
		switch {
		case seen[n]:
			out = append(out, fmt.Sprintf("%s: note %s shown twice", where, n))
		case !sent[n]:
			out = append(out, fmt.Sprintf("%s: note %s, which this session had not sent", where, n))
		}
		seen[n] = true
	}
	return out
}

// describe names op in a report.
func (op NoteOp) describe() string {
	if op.Add != "" {
		return "add_note " + op.Add
	}
	return "list_notes"
}

// NotesCounts sums what histories show: notes sent, acknowledged, sent
// with an unknown outcome, and, of those, shown by the session's last
// answer (applied after all).
func NotesCounts(hs []NotesHistory) (sent, acked, unknown, unknownApplied int) {
	for _, h := range hs {
		var last []string
		for _, op := range h.Ops {
			if op.OK {
				last = op.Notes
			}
		}
		for _, op := range h.Ops {
			if op.Add == "" {
				continue
			}
			sent++
			switch {
			case op.OK:
				acked++
			case slices.Contains(last, op.Add):
				unknown++
				unknownApplied++
			default:
				unknown++
			}
		}
	}
	return sent, acked, unknown, unknownApplied
}
