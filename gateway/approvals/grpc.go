package approvals

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/mcpgrain/mcpgrain/gateway/auth"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// GRPCOptions configure the gRPC ApprovalService.
type GRPCOptions struct {
	// Auth authenticates callers by "authorization: Bearer <token>"
	// metadata (required).
	Auth *auth.Authenticator
	// Limiter rate-limits callers per principal (nil: unlimited).
	Limiter *auth.Limiter
	// WatchInterval is how often WatchPausedExecutions looks for new
	// pauses (zero: [DefaultWatchInterval]).
	WatchInterval time.Duration
	// Logger logs failures. Default slog.Default().
	Logger *slog.Logger
}

// GRPCServer implements mcpgrain.v1.ApprovalService.
type GRPCServer struct {
	pb.UnimplementedApprovalServiceServer
	svc *Service
	o   GRPCOptions
}

// NewGRPCServer returns the ApprovalService over svc.
func NewGRPCServer(svc *Service, o GRPCOptions) (*GRPCServer, error) {
	if svc == nil || o.Auth == nil {
		return nil, errors.New("approvals: Service and GRPCOptions.Auth are required")
	}
	if o.WatchInterval <= 0 {
		o.WatchInterval = DefaultWatchInterval
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &GRPCServer{svc: svc, o: o}, nil
}

// Register adds the service to s.
func (g *GRPCServer) Register(s grpc.ServiceRegistrar) { pb.RegisterApprovalServiceServer(s, g) }

func (g *GRPCServer) principal(ctx context.Context) (*pb.Principal, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	var remote string
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		remote = p.Addr.String()
	}
	who, err := g.o.Auth.AuthenticateHeader(ctx, remote, md.Get("authorization"))
	if err != nil {
		var ae *auth.Error
		if errors.As(err, &ae) && ae.Status == http.StatusBadRequest {
			return nil, status.Error(codes.InvalidArgument, ae.Message)
		}
		if errors.As(err, &ae) && ae.Code == auth.CodeRateLimited {
			return nil, status.Errorf(codes.ResourceExhausted, "%s (retry in %s)", ae.Message, ae.RetryAfter.Round(time.Second))
		}
		if errors.As(err, &ae) && ae.Code == auth.CodeInsufficientScope {
			return nil, status.Error(codes.PermissionDenied, auth.CodeInsufficientScope+": "+ae.Message)
		}
		if errors.As(err, &ae) && ae.Code == auth.CodeTemporarilyUnavailable {
			g.o.Logger.Warn("approvals: cannot verify an access token", "err", err)
			return nil, status.Error(codes.Unavailable, ae.Message)
		}
		msg := "missing or unknown bearer token"
		if errors.As(err, &ae) {
			msg = ae.Message
		}
		return nil, status.Error(codes.Unauthenticated, msg)
	}
	if g.o.Limiter != nil {
		if ok, retry := g.o.Limiter.Allow(who); !ok {
			return nil, status.Errorf(codes.ResourceExhausted, "rate limited; retry in %s", retry.Round(time.Millisecond))
		}
	}
	return who, nil
}

func (g *GRPCServer) fail(err error) error {
	switch {
	case errors.Is(err, ErrNotFound):
		return status.Error(codes.NotFound, "execution_not_found: no execution with this id is waiting for approval (already decided, timed out, or not in your organization)")
	case errors.Is(err, ErrAlreadyDecided):
		return status.Error(codes.FailedPrecondition, "execution_already_decided: this execution was already decided (or timed out)")
	case errors.Is(err, ErrInvalid):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, ErrInsufficientRole):
		return status.Error(codes.PermissionDenied, err.Error())
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	}
	g.o.Logger.Warn("approvals: grpc request failed", "err", err)
	return status.Error(codes.Unavailable, "the execution's session could not be reached; retry (a decision may have been recorded: look again first)")
}

// ListPausedExecutions implements ApprovalService.
func (g *GRPCServer) ListPausedExecutions(ctx context.Context, _ *pb.ListPausedExecutionsRequest) (*pb.ListPausedExecutionsResponse, error) {
	who, err := g.principal(ctx)
	if err != nil {
		return nil, err
	}
	list, err := g.svc.List(ctx, who)
	if err != nil {
		return nil, g.fail(err)
	}
	return &pb.ListPausedExecutionsResponse{Executions: list}, nil
}

// GetPausedExecution implements ApprovalService.
func (g *GRPCServer) GetPausedExecution(ctx context.Context, req *pb.GetPausedExecutionRequest) (*pb.GetPausedExecutionResponse, error) {
	who, err := g.principal(ctx)
	if err != nil {
		return nil, err
	}
	p, err := g.svc.Get(ctx, who, "", req.GetExecutionId())
	if err != nil {
		return nil, g.fail(err)
	}
	return &pb.GetPausedExecutionResponse{Execution: p}, nil
}

// DecideExecution implements ApprovalService.
func (g *GRPCServer) DecideExecution(ctx context.Context, req *pb.DecideExecutionRequest) (*pb.DecideExecutionResponse, error) {
	who, err := g.principal(ctx)
	if err != nil {
		return nil, err
	}
	var content map[string]any
	if req.GetContentJson() != "" {
		if len(req.GetContentJson()) > MaxContentBytes || json.Unmarshal([]byte(req.GetContentJson()), &content) != nil {
			return nil, status.Errorf(codes.InvalidArgument, "content_json must be a JSON object of at most %d bytes", MaxContentBytes)
		}
	}
	d, err := g.svc.Decide(ctx, who, "", req.GetExecutionId(), req.GetAction(), content)
	if err != nil {
		return nil, g.fail(err)
	}
	return &pb.DecideExecutionResponse{Status: d.Status, Text: d.Text}, nil
}

// WatchPausedExecutions implements ApprovalService: the current listing,
// then each execution that pauses later, until the caller cancels.
func (g *GRPCServer) WatchPausedExecutions(_ *pb.WatchPausedExecutionsRequest, stream grpc.ServerStreamingServer[pb.WatchPausedExecutionsResponse]) error {
	ctx := stream.Context()
	who, err := g.principal(ctx)
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	t := time.NewTicker(g.o.WatchInterval)
	defer t.Stop()
	for {
		list, err := g.svc.List(ctx, who)
		if err != nil && ctx.Err() == nil {
			return g.fail(err)
		}
		next := make(map[string]bool, len(list))
		for _, p := range list {
			next[p.GetExecutionId()] = true
			if seen[p.GetExecutionId()] {
				continue
			}
			if err := stream.Send(&pb.WatchPausedExecutionsResponse{Execution: p}); err != nil {
				return err
			}
		}
		seen = next // forget settled ones: the map stays as small as the listing
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
