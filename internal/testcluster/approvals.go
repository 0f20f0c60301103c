package testcluster

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// ApprovalClient is a plaintext gRPC ApprovalService client of addr,
// closed when the test ends.
func ApprovalClient(t testing.TB, addr string) pb.ApprovalServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return pb.NewApprovalServiceClient(conn)
}

// WithToken is a request context carrying a bearer token; it ends with
// the test.
func WithToken(t testing.TB, token string) context.Context {
	return metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer "+token)
}

// TokenFile writes token to a file (mode 600) for --token-file: the CLI
// warns about a token on its command line.
func TokenFile(t testing.TB, token string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(p, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// CLI runs the mcpgrain binary bin (within a minute, without
// $MCPGRAIN_TOKEN) and returns its combined output.
func CLI(t testing.TB, bin string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "MCPGRAIN_TOKEN=")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// InboxDecision is the CSS selector of execution id's decision row on the
// inbox page.
func InboxDecision(id string) string { return `tr.decision[data-id="` + id + `"]` }
