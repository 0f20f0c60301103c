package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
)

// Error kinds of durable executions (Outcome.ErrorKind).
const (
	// KindDiverged: replaying the execution's journal, the code asked for
	// a different tool call than the journal holds (or for more or fewer
	// calls). The execution fails instead of guessing.
	KindDiverged = "execution_diverged"
	// KindInterrupted is the prefix of the error thrown into the code for
	// a call that was in flight when its node died (its outcome is
	// unknown) and that is not idempotent.
	KindInterrupted = "execution_interrupted"
)

// ErrDiverged is wrapped by the cause of a failed replay.
var ErrDiverged = errors.New(KindDiverged)

// Call is one journaled tool call, decoded: what replay compares with the
// code's call at the same position and answers it with.
type Call struct {
	// State is runstore.JournalInFlight, JournalDone or JournalAwaiting.
	State string `json:"-"`
	// Path is the tool path ("demo.createTodo", "search").
	Path string `json:"path"`
	// Hash identifies the arguments (see CallHash).
	Hash string `json:"hash"`
	// Result is the call's JSON result (done, no error).
	Result json.RawMessage `json:"result,omitempty"`
	// Failed marks an error outcome; Error is its message.
	Failed bool   `json:"failed,omitempty"`
	Error  string `json:"error,omitempty"`
	// AtMs is when the outcome was recorded (the execution's clock moves
	// to it when the outcome is handed to the code), Unix ms.
	AtMs int64 `json:"at,omitempty"`
	// Pause rebuilds the pause of a call awaiting approval.
	Pause *pauseRecord `json:"pause,omitempty"`
}

// pauseRecord is a Pause as journaled.
type pauseRecord struct {
	ID           string          `json:"id"`
	Address      string          `json:"address"`
	Args         json.RawMessage `json:"args,omitempty"`
	ApprovalText string          `json:"approvalText,omitempty"`
	Message      string          `json:"message"`
	Policy       string          `json:"policy,omitempty"`
	DeadlineMs   int64           `json:"deadline"`
}

// CallHash identifies a call: SHA-256 of the path and the arguments'
// canonical JSON (encoding/json sorts object keys).
func CallHash(path string, args any) string {
	b, err := json.Marshal(args)
	if err != nil {
		b = []byte(fmt.Sprintf("%v", args))
	}
	h := sha256.New()
	h.Write([]byte(path))
	h.Write([]byte{0})
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// Step is what a durable execution does with one tool call of its code.
type Step int

// Steps of ReplayStep.
const (
	// StepLive: the journal has no entry at this position: make the call
	// for real (and journal it).
	StepLive Step = iota
	// StepAnswer: answer the call with the journaled outcome; nothing is
	// sent.
	StepAnswer
	// StepPause: the call was waiting for approval: pause here again.
	StepPause
	// StepInterrupted: the call was in flight when the execution was lost
	// and is not idempotent: fail it with execution_interrupted.
	StepInterrupted
	// StepRetry: the call was in flight and is idempotent: send it again,
	// once.
	StepRetry
	// StepDiverged: the code asked for another call than the journal
	// holds here: fail the execution.
	StepDiverged
)

func (s Step) String() string {
	return [...]string{"live", "answer", "pause", "interrupted", "retry", "diverged"}[s]
}

// ReplayStep decides what the code's call number seq (path, hash) gets,
// given the journal: the pure core of deterministic replay. idempotent
// says whether the tool may be sent again after a crash. The error
// explains a divergence.
func ReplayStep(journal []Call, seq int, path, hash string, idempotent bool) (Step, error) {
	if seq >= len(journal) {
		return StepLive, nil
	}
	c := journal[seq]
	if c.Path != path || c.Hash != hash {
		what := "arguments"
		if c.Path != path {
			what = "tool"
		}
		return StepDiverged, fmt.Errorf("%w: call #%d asks for tools.%s, the journal holds tools.%s (different %s): the code is not deterministic",
			ErrDiverged, seq+1, path, c.Path, what)
	}
	switch c.State {
	case stateDone:
		return StepAnswer, nil
	case stateAwaiting:
		if seq != len(journal)-1 {
			return StepDiverged, fmt.Errorf("%w: call #%d awaits approval but the journal continues past it", ErrDiverged, seq+1)
		}
		return StepPause, nil
	case stateInFlight:
		if seq != len(journal)-1 {
			return StepDiverged, fmt.Errorf("%w: call #%d is in flight but the journal continues past it", ErrDiverged, seq+1)
		}
		if idempotent {
			return StepRetry, nil
		}
		return StepInterrupted, nil
	}
	return StepDiverged, fmt.Errorf("%w: call #%d has unknown journal state %q", ErrDiverged, seq+1, c.State)
}

// ReplayEnd checks a run that finished after calls tool calls against its
// journal: finishing before the journal's last call is a divergence.
func ReplayEnd(journal []Call, calls int) error {
	if calls < len(journal) {
		return fmt.Errorf("%w: the code finished after %d tool calls, the journal holds %d: the code is not deterministic",
			ErrDiverged, calls, len(journal))
	}
	return nil
}

// Journal states (store.Journal* values, repeated so that the pure part
// does not import the store).
const (
	stateInFlight = "in_flight"
	stateDone     = "done"
	stateAwaiting = "awaiting"
)
