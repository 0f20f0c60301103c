package app

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// statePrefix marks a requestState that [Elicit] wrote: the answers of
// earlier rounds, as base64url JSON. Another requestState is not Elicit's
// and holds no answers.
const statePrefix = "mcpgrain-elicit.v1."

// answersOf returns the answers a tool call's retry brings: those of the
// earlier rounds (in its requestState) and this round's input responses.
func answersOf(p *mcp.CallToolParamsRaw) (map[string]*mcp.ElicitResult, error) {
	answers := map[string]*mcp.ElicitResult{}
	if enc, ok := strings.CutPrefix(p.RequestState, statePrefix); ok {
		raw, err := base64.RawURLEncoding.DecodeString(enc)
		if err == nil {
			err = json.Unmarshal(raw, &answers)
		}
		if err != nil {
			return nil, fmt.Errorf("mcpgrain: the retry's requestState: %w", err)
		}
	}
	for key, resp := range p.InputResponses {
		r, ok := resp.(*mcp.ElicitResult)
		if !ok || r == nil {
			return nil, fmt.Errorf("mcpgrain: the input response %q is not an elicitation result", key)
		}
		answers[key] = r
	}
	for key, r := range answers {
		if r == nil {
			return nil, fmt.Errorf("mcpgrain: the answer to %q is empty", key)
		}
	}
	return answers, nil
}

// encodeAnswers is the requestState that carries answers to the next round
// ("" for none).
func encodeAnswers(answers map[string]*mcp.ElicitResult) (string, error) {
	if len(answers) == 0 {
		return "", nil
	}
	raw, err := json.Marshal(answers)
	if err != nil {
		return "", fmt.Errorf("mcpgrain: encoding the answers so far: %w", err)
	}
	return statePrefix + base64.RawURLEncoding.EncodeToString(raw), nil
}

// InputRequiredMiddleware is the receiving middleware that turns a
// tools/call whose handler failed with an [*InputRequiredError] (as a
// typed handler's error, in its isError result, or as a raw handler's
// error) into the call's input_required result, for a 2026-07-28 client.
// The servers a node builds have it (toolpacks.NewServer); a program that
// serves its handlers on a plain go-sdk server adds it with
// AddReceivingMiddleware. Other results pass unchanged.
func InputRequiredMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		call, ok := req.(*mcp.CallToolRequest)
		if method != "tools/call" || !ok || !Sessionless(call) {
			return res, err
		}
		var ir *InputRequiredError
		switch {
		case err != nil && errors.As(err, &ir):
		case err == nil && errors.As(toolError(res), &ir):
		default:
			return res, err
		}
		return inputRequired(ir)
	}
}

// toolError is the error a typed tool handler failed with (nil if none).
func toolError(res mcp.Result) error {
	if r, ok := res.(*mcp.CallToolResult); ok && r != nil && r.IsError {
		return r.GetError()
	}
	return nil
}

// inputRequired is the input_required result of ir. go-sdk sets a
// result's type only on what a tool handler returns, or when decoding one;
// this result is made after the handler, so its type is decoded.
func inputRequired(ir *InputRequiredError) (*mcp.CallToolResult, error) {
	res := new(mcp.CallToolResult)
	if err := json.Unmarshal([]byte(`{"content":null,"resultType":"input_required"}`), res); err != nil {
		return nil, fmt.Errorf("mcpgrain: making the input_required result: %w", err)
	}
	res.Content = nil
	res.InputRequests = ir.Requests
	res.RequestState = ir.State
	return res, nil
}
