package inspect

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/mcpgrain/mcpgrain/actors/app"
)

// HandleLister lists a principal's live handles (the node's handle
// service, actors/handle).
type HandleLister interface {
	// ListOf returns the live handles of user of organization org.
	ListOf(ctx context.Context, org, user string) ([]app.HandleInfo, error)
}

// Handles are a user's live server-minted handles (the SDK's NewHandle),
// as inspection reports them.
type Handles struct {
	Org  string `json:"org"`
	User string `json:"user"`
	// Handles are the most recently minted first, at most
	// app.MaxListedHandles.
	Handles []Handle `json:"handles"`
}

// Handle is one live handle.
type Handle struct {
	ID       string    `json:"id"`
	Tool     string    `json:"tool,omitempty"`
	Created  time.Time `json:"created"`
	LastUsed time.Time `json:"lastUsed"`
	Expires  time.Time `json:"expires"`
}

// Handles lists the live handles of user of organization org: an
// administrator's view of what the SDK's Handles lists for that user.
func (in Inspector) Handles(ctx context.Context, org, user string) (Handles, error) {
	if in.HandleList == nil {
		return Handles{}, errors.New("inspect: this node lists no handles")
	}
	l, err := in.HandleList.ListOf(ctx, org, user)
	if err != nil {
		return Handles{}, fmt.Errorf("inspect: handles of %s: %w", user, err)
	}
	out := Handles{Org: org, User: user, Handles: make([]Handle, 0, len(l))}
	for _, h := range l {
		out.Handles = append(out.Handles, Handle{ID: h.ID, Tool: h.Tool, Created: h.Created.UTC(), LastUsed: h.LastUsed.UTC(), Expires: h.Expires.UTC()})
	}
	return out, nil
}

// Text writes h as readable text (what `mcpgrain inspect handles` prints).
func (h Handles) Text(w io.Writer) error {
	if len(h.Handles) == 0 {
		_, err := fmt.Fprintf(w, "%s (%s) holds no live handles\n", h.User, h.Org)
		return err
	}
	fmt.Fprintf(w, "%s (%s) holds %d live handles (newest first):\n", h.User, h.Org, len(h.Handles))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  handle\tminted by\tcreated\tlast used\texpires")
	for _, x := range h.Handles {
		tool := x.Tool
		if tool == "" {
			tool = "-"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", x.ID, tool, stamp(x.Created), stamp(x.LastUsed), stamp(x.Expires))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("inspect: write: %w", err)
	}
	return nil
}
