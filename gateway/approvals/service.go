// Package approvals serves the human side of paused executions: the HTTP
// routes, the browser approval page, the approvals inbox (an
// organization's waiting executions and recent decisions, live) and the
// gRPC ApprovalService. All of them go through one [Service], which finds
// an execution's owner in the store's execution directory — a session
// grain, a task grain (an execute run as a task) or a continuation grain
// (a 2026-07-28 sessionless execute) — and asks that grain, wherever it
// lives in the cluster, to show or decide it.
//
// Who may do what: anyone authenticated in the owner's organization may see
// an execution (list, show, watch, the page); deciding it takes a role
// that [ServiceOptions.Approvers] allows (policy.Approvers): admins
// always, members unless approvers is "admin", viewers never
// ([ErrInsufficientRole]). The grain that owns the pause checks again. Executions of other organizations do not exist for the caller
// (not found, never forbidden), so ids leak nothing.
package approvals

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/mcpgrain/mcpgrain/actors/policy"
	"github.com/mcpgrain/mcpgrain/cluster/grain"
	"github.com/mcpgrain/mcpgrain/cluster/store"
	"github.com/mcpgrain/mcpgrain/exchange"
	"github.com/mcpgrain/mcpgrain/exchange/directory"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// Errors of [Service] methods; the surfaces map them to statuses.
var (
	// ErrNotFound: no such paused execution for the caller (unknown,
	// settled, expired or of another organization).
	ErrNotFound = errors.New("execution_not_found")
	// ErrAlreadyDecided: a decision was recorded before, or the execution
	// settled otherwise (timed out, cancelled).
	ErrAlreadyDecided = errors.New("execution_already_decided")
	// ErrInvalid: the request is malformed (bad action, bad content).
	ErrInvalid = errors.New("invalid_request")
	// ErrUnavailable: the owner could not be reached, or the outcome of a
	// decision is unknown (it may have been recorded: look again).
	ErrUnavailable = errors.New("unavailable")
	// ErrInsufficientRole: the caller may see the execution but its role
	// may not decide it (a viewer; a member when only admins decide).
	ErrInsufficientRole = errors.New("insufficient_role")
)

// Actions a decision may take.
var actions = map[string]string{"accept": StatusAccepted, "decline": StatusDeclined, "cancel": StatusCancelled}

// A [Decision]'s statuses: the MCP elicitation actions (accept, decline,
// cancel) as past participles, the words every surface uses for an
// outcome (with "timed out" for a pause nobody decided in time).
const (
	StatusAccepted  = "accepted"
	StatusDeclined  = "declined"
	StatusCancelled = "cancelled"
)

// Directory is the store's execution directory.
type Directory interface {
	GetExecution(ctx context.Context, execID string) (directory.Execution, error)
	ListExecutions(ctx context.Context, org string, now time.Time, limit int) ([]directory.Execution, error)
	// RecordDecision and ListDecided keep the inbox's history.
	RecordDecision(ctx context.Context, execID, user, action, reason string, at time.Time) error
	ListDecided(ctx context.Context, org string, limit int) ([]directory.Execution, error)
}

// Service is the approval logic shared by every surface. It is safe for
// concurrent use.
type Service struct {
	node      grain.Requester
	dir       Directory
	now       func() time.Time
	approvers policy.Approvers
	log       *slog.Logger
}

// ServiceOptions configure a [Service].
type ServiceOptions struct {
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Approvers is who may decide: policy.ApproversMember (the default,
	// for "": admins and members) or policy.ApproversAdmin (admins only).
	// Viewers never decide.
	Approvers policy.Approvers
	// Logger logs failures to record a decision. Default slog.Default().
	Logger *slog.Logger
}

// NewService returns a Service that finds executions in dir and reaches
// their sessions through node.
func NewService(node grain.Requester, dir Directory, o ServiceOptions) *Service {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Service{node: node, dir: dir, now: o.Now, approvers: o.Approvers, log: o.Logger}
}

// DecidingRole is the least role that may decide executions here:
// member, or admin when only admins decide.
func (s *Service) DecidingRole() string {
	if s.approvers == policy.ApproversAdmin {
		return "admin"
	}
	return "member"
}

// MayDecide reports whether who's role may decide executions here (it
// may still find none to decide).
func (s *Service) MayDecide(who *pb.Principal) bool {
	return s.approvers.MayDecide(who.GetRole())
}

// roleError is [ErrInsufficientRole] explained for who: a role that may
// decide nothing, or one the approvers setting leaves out.
func (s *Service) roleError(who *pb.Principal) error {
	if policy.ApproversMember.MayDecide(who.GetRole()) {
		return fmt.Errorf("%w: only admins decide paused executions here (your role: %s)", ErrInsufficientRole, roleName(who))
	}
	return fmt.Errorf("%w: your role (%s) may see paused executions but not decide them", ErrInsufficientRole, roleName(who))
}

// roleName names who's role for a message ("none": a principal without
// one, which decides nothing).
func roleName(who *pb.Principal) string {
	if who.GetRole() == "" {
		return "none"
	}
	return who.GetRole()
}

// ListLimit bounds List.
const ListLimit = 500

// maxIDLen bounds execution and session ids accepted from callers.
const maxIDLen = 128

// List returns the caller organization's paused executions, soonest
// deadline first, from the directory (no session is woken for it).
func (s *Service) List(ctx context.Context, who *pb.Principal) ([]*pb.PausedExecution, error) {
	rows, err := s.dir.ListExecutions(ctx, who.GetOrg(), s.now(), ListLimit)
	if err != nil {
		return nil, fmt.Errorf("%w: list executions: %v", ErrUnavailable, err)
	}
	out := make([]*pb.PausedExecution, 0, len(rows))
	for _, r := range rows {
		out = append(out, fromRow(r))
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].GetDeadlineMs() < out[j].GetDeadlineMs() })
	return out, nil
}

func fromRow(r directory.Execution) *pb.PausedExecution {
	return &pb.PausedExecution{
		ExecutionId: r.ID, SessionId: r.Session, Address: r.Address, ArgumentsJson: r.ArgsJSON,
		Message: r.Message, ApprovalText: r.ApprovalText, DeadlineMs: r.Deadline.UnixMilli(),
		Principal: &pb.Principal{User: r.User, Org: r.Org},
	}
}

// owner finds the session that owns execID for the caller. sessionID, when
// set, must name it.
func (s *Service) owner(ctx context.Context, who *pb.Principal, sessionID, execID string) (string, error) {
	if !validID(execID) || (sessionID != "" && !validID(sessionID)) {
		return "", ErrNotFound
	}
	row, err := s.dir.GetExecution(ctx, execID)
	if errors.Is(err, store.ErrNotFound) {
		return "", ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("%w: look up execution: %v", ErrUnavailable, err)
	}
	if row.Org != who.GetOrg() || (sessionID != "" && row.Session != sessionID) {
		return "", ErrNotFound
	}
	if !row.Settled.IsZero() {
		return "", ErrAlreadyDecided
	}
	return row.Session, nil
}

func validID(id string) bool {
	if id == "" || len(id) > maxIDLen {
		return false
	}
	return !strings.ContainsFunc(id, func(r rune) bool { return r <= ' ' || r == 0x7f })
}

// Get returns one paused execution, as its session sees it now. sessionID
// may be empty; when set the execution must belong to it.
func (s *Service) Get(ctx context.Context, who *pb.Principal, sessionID, execID string) (*pb.PausedExecution, error) {
	sid, err := s.owner(ctx, who, sessionID, execID)
	if err != nil {
		return nil, err
	}
	if exchange.OwnerKind(sid) != exchange.KindSession {
		// A task's or a sessionless (continuation) execution's pause is as
		// its journal published it (its grain keeps no other view of it
		// while it waits).
		row, err := s.dir.GetExecution(ctx, execID)
		if err != nil {
			return nil, s.notFound(ctx, execID)
		}
		return fromRow(row), nil
	}
	m, err := s.node.Request(ctx, exchange.KindSession, sid, &pb.ExecutionGet{Principal: who, ExecutionId: execID}, grain.Idempotent())
	if err != nil {
		return nil, fmt.Errorf("%w: ask session: %v", ErrUnavailable, err)
	}
	r, ok := m.(*pb.ExecutionReply)
	if !ok {
		return nil, fmt.Errorf("%w: unexpected reply %T", ErrUnavailable, m)
	}
	if r.GetStatus() != pb.ExecutionReply_STATUS_OK || len(r.GetExecutions()) == 0 {
		return nil, s.notFound(ctx, execID)
	}
	return r.GetExecutions()[0], nil
}

// notFound is the error for an execution its session did not find. The
// session forgets a settled execution (and its decision), so one that
// settled after [Service.owner] read the directory is not found there:
// the directory, read again, tells it apart from one that never was, and
// a request racing the settlement is told "already decided" as every
// later one is (not "not found").
func (s *Service) notFound(ctx context.Context, execID string) error {
	if row, err := s.dir.GetExecution(ctx, execID); err == nil && !row.Settled.IsZero() {
		return ErrAlreadyDecided
	}
	return ErrNotFound
}

// Decision is a recorded decision.
type Decision struct {
	// Status is "accepted", "declined" or "cancelled".
	Status string `json:"status"`
	// Text is the confirmation ("I've accepted it").
	Text string `json:"text"`
	// By is the deciding user.
	By string `json:"by"`
}

// MaxContentBytes bounds a decision's content (as JSON).
const MaxContentBytes = 64 << 10

// Decide records who's decision for execID, once. content (may be nil) is
// the form content; for "decline" a "reason" string in it is kept.
func (s *Service) Decide(ctx context.Context, who *pb.Principal, sessionID, execID, action string, content map[string]any) (Decision, error) {
	status, ok := actions[action]
	if !ok {
		return Decision{}, fmt.Errorf("%w: action must be accept, decline or cancel (got %q)", ErrInvalid, action)
	}
	if !s.MayDecide(who) {
		return Decision{}, s.roleError(who)
	}
	var contentJSON string
	if content != nil {
		b, err := json.Marshal(content)
		if err != nil || len(b) > MaxContentBytes {
			return Decision{}, fmt.Errorf("%w: content must be a JSON object of at most %d bytes", ErrInvalid, MaxContentBytes)
		}
		contentJSON = string(b)
	}
	sid, err := s.owner(ctx, who, sessionID, execID)
	if err != nil {
		return Decision{}, err
	}
	// Not idempotent: a retry after an unknown outcome would report "already
	// decided" for the caller's own decision, so the node does not retry.
	m, err := s.node.Request(ctx, exchange.OwnerKind(sid), sid, &pb.ExecutionDecide{Principal: who, ExecutionId: execID, Action: action, ContentJson: contentJSON})
	if err != nil {
		return Decision{}, fmt.Errorf("%w: ask session: %v", ErrUnavailable, err)
	}
	r, ok := m.(*pb.ExecutionReply)
	if !ok {
		return Decision{}, fmt.Errorf("%w: unexpected reply %T", ErrUnavailable, m)
	}
	switch r.GetStatus() {
	case pb.ExecutionReply_STATUS_OK:
		if !r.GetRecorded() { // an owner that wrote the entry with its decision needs no second write
			s.record(ctx, who, execID, action, reasonOf(content))
		}
		return Decision{Status: status, Text: r.GetText(), By: who.GetUser()}, nil
	case pb.ExecutionReply_STATUS_ALREADY_DECIDED:
		return Decision{}, ErrAlreadyDecided
	case pb.ExecutionReply_STATUS_FORBIDDEN: // the owner's node decides only admins
		return Decision{}, s.roleError(who)
	}
	return Decision{}, s.notFound(ctx, execID)
}
