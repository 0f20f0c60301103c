package dispatch

// GrowStack grows the calling goroutine's stack, if it is small, to the
// size a deep request handler reaches (go-sdk's tool call, with its input
// validation and mcpgrain's middleware), in one copy made while the stack
// is still shallow.
//
// A goroutine starts with a small stack (2 KiB, or the average the
// collector last saw) that the runtime doubles by copying it whenever a
// call does not fit. The cost of a copy is per frame on the stack (each
// is looked up in the function tables and its pointers adjusted), so the
// copies made deep in a handler cost much more than one made near the
// goroutine's start. go-sdk runs every request's handler on a new
// goroutine (internal/jsonrpc2's handleAsync); calling GrowStack first
// thing in it, from the outermost middleware, replaces those deep copies
// with one shallow one. On a stack already as large it costs a call and
// the clearing of a frame.
func GrowStack() {
	growStack(0)
}

// handlerStack is the frame growStack makes: with the frames below it,
// the stack is grown to 16 KiB (the runtime doubles until the frame
// fits), which is what go-sdk's tool call through mcpgrain's middleware
// reached, and the largest size the runtime keeps in its per-P caches of
// free stacks (a larger one is allocated from the heap each time). A
// handler that goes deeper still grows the stack, once more.
const handlerStack = 8 << 10

//go:noinline
func growStack(i int) byte {
	var frame [handlerStack]byte
	return touch(frame[:], i)
}

// touch reads b[i], so that the frame is kept (and cleared) by the
// compiler.
//
//go:noinline
func touch(b []byte, i int) byte { return b[i] }
