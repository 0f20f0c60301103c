package mcpgrain_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain"
)

// cart is a shopping cart kept behind a handle.
var cart = mcpgrain.NewState[[]string]("example-cart", mcpgrain.StateOptions[[]string]{})

type cartArgs struct {
	Cart string `json:"cart"`
	Item string `json:"item"`
}

// A tool mints a handle and returns it; the client passes it back as an
// argument. No session is needed: this works in the sessionless
// 2026-07-28 era as in a stateful session (examples/notebook is the whole
// program).
func ExampleNewHandle() {
	newCart := func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		h, err := mcpgrain.NewHandle(ctx)
		if err != nil {
			return nil, nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: h}}}, nil, nil
	}
	mcpgrain.Main(mcpgrain.Server{
		Name:     "shop",
		Register: func(s *mcp.Server) { mcp.AddTool(s, &mcp.Tool{Name: "new_cart"}, newCart) },
	})
}

// OnHandle binds the handler's context to a handle its client passed in:
// State then acts on the handle's state, wherever its grain lives.
func ExampleOnHandle() {
	addItem := func(ctx context.Context, _ *mcp.CallToolRequest, args cartArgs) (*mcp.CallToolResult, any, error) {
		ctx, err := mcpgrain.OnHandle(ctx, args.Cart)
		if errors.Is(err, mcpgrain.ErrUnknownHandle) {
			// Never minted, dropped, expired or someone else's: one answer.
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "no such cart"}}}, nil, nil
		}
		if err != nil {
			return nil, nil, err
		}
		items, err := cart.Update(ctx, func(items *[]string) error {
			*items = append(*items, args.Item)
			return nil
		})
		if err != nil {
			return nil, nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprint(items)}}}, nil, nil
	}
	mcpgrain.Main(mcpgrain.Server{
		Name:     "shop",
		Register: func(s *mcp.Server) { mcp.AddTool(s, &mcp.Tool{Name: "add_item"}, addItem) },
	})
}

// The handle calls need a request a node serves; elsewhere they say so.
func ExampleDropHandle() {
	err := mcpgrain.DropHandle(context.Background(), "h_AAAAAAAAAAAAAAAAAAAAAA")
	fmt.Println(errors.Is(err, mcpgrain.ErrUnknownHandle), err)
	// Output:
	// false mcpgrain: this request cannot reach handles (not served by an mcpgrain node)
}

// A tool lists the caller's live handles — here so a client that lost its
// cart can find it again. Only the caller's own handles are listed.
func ExampleHandles() {
	myCarts := func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		hs, err := mcpgrain.Handles(ctx)
		if err != nil {
			return nil, nil, err
		}
		var text string
		for _, h := range hs { // the most recently minted first
			text += fmt.Sprintf("%s: last used %s, expires %s\n", h.ID, h.LastUsed.Format(time.RFC3339), h.Expires.Format(time.RFC3339))
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil, nil
	}
	mcpgrain.Main(mcpgrain.Server{
		Name:     "shop",
		Register: func(s *mcp.Server) { mcp.AddTool(s, &mcp.Tool{Name: "my_carts"}, myCarts) },
	})
}
