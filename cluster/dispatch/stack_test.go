package dispatch_test

import (
	"testing"
	"unsafe"

	"github.com/mcpgrain/mcpgrain/cluster/dispatch"
)

// After GrowStack, a new goroutine's calls can go 10 KiB deeper without
// the runtime copying its stack (a copy moves every frame, so the address
// of a local variable changes); without it, the same calls copy it.
func TestGrowStackMakesRoomForADeepHandler(t *testing.T) {
	const deep = 10 << 10
	if moved := stackMovedBy(false, deep); !moved {
		t.Fatalf("without GrowStack, %d bytes of frames on a new goroutine did not move its stack: the check sees nothing", deep)
	}
	if moved := stackMovedBy(true, deep); moved {
		t.Fatalf("after GrowStack, %d bytes of frames on a new goroutine moved its stack", deep)
	}
}

// stackMovedBy reports whether calls using n bytes of stack, on a new
// goroutine (after GrowStack if grow), moved that goroutine's stack.
func stackMovedBy(grow bool, n int) bool {
	moved := make(chan bool)
	go func() {
		if grow {
			dispatch.GrowStack()
		}
		var mark byte
		before := uintptr(unsafe.Pointer(&mark))
		use(n / frameBytes)
		moved <- uintptr(unsafe.Pointer(&mark)) != before
	}()
	return <-moved
}

const frameBytes = 512

// use makes depth nested calls of about frameBytes of stack each.
//
//go:noinline
func use(depth int) byte {
	var frame [frameBytes]byte
	frame[depth%frameBytes] = byte(depth)
	if depth > 0 {
		frame[0] += use(depth - 1)
	}
	return frame[depth%frameBytes] + frame[0]
}
