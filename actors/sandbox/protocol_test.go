package sandbox

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"testing"
)

func TestFrameRoundTrip(t *testing.T) {
	t.Parallel()
	frames := []frame{
		{T: frameReady, Heap: 1 << 20},
		{T: frameStart, Code: "return 1", Now: 1_700_000_000_000_000_000, Lim: &wireLimits{MaxToolCalls: 3, MaxOutput: 100, MaxHeapGrowth: 1 << 29, Seed: 42, FixedClock: true}},
		{T: frameCall, Seq: 1, Path: "demo.createTodo", JSON: json.RawMessage(`{"title":"x"}`)},
		{T: frameResult, Seq: 1, JSON: json.RawMessage(`[1,"é",null]`), Now: 5},
		{T: frameResult, Seq: 2, Kind: resultError, Err: ""},
		{T: frameLog, Text: "warn: \u2028 careful"},
		{T: frameEmit},
		{T: frameDone, Kind: KindRuntime, Err: "boom", Heap: 7, Niced: true},
	}
	var buf bytes.Buffer
	fw := newFrameWriter(&buf)
	for _, f := range frames {
		if err := fw.write(f); err != nil {
			t.Fatal(err)
		}
	}
	for i, want := range frames {
		got, err := readFrame(&buf)
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("frame %d = %+v, want %+v", i, got, want)
		}
	}
	if _, err := readFrame(&buf); !errors.Is(err, io.EOF) {
		t.Fatalf("after the last frame: %v, want io.EOF", err)
	}
}

func TestReadFrameRejectsBadInput(t *testing.T) {
	t.Parallel()
	frameOf := func(body string) []byte {
		b := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
		return append(b, body...)
	}
	for name, in := range map[string][]byte{
		"short header":   {0, 0},
		"huge length":    {0xff, 0xff, 0xff, 0xff},
		"truncated body": frameOf(`{"t":"log"}`)[:8],
		"not JSON":       frameOf(`nope`),
		"no type":        frameOf(`{"seq":1}`),
		"bad raw JSON":   frameOf(`{"t":"emit","json":}`),
	} {
		if _, err := readFrame(bytes.NewReader(in)); err == nil || errors.Is(err, io.EOF) {
			t.Errorf("%s: err = %v, want a protocol error", name, err)
		}
	}
}

// FuzzReadFrame checks that no byte stream makes the frame decoder panic, allocate beyond the frame
// bound, or return a frame that does not encode again. `go test` runs only the seeds; use
// -fuzz=FuzzReadFrame to explore.
func FuzzReadFrame(f *testing.F) {
	var buf bytes.Buffer
	fw := newFrameWriter(&buf)
	for _, fr := range []frame{
		{T: frameCall, Seq: 1, Path: "a.b", JSON: json.RawMessage(`{"x":[1,2]}`)},
		{T: frameStart, Code: "return 1", Lim: &wireLimits{MaxOutput: 1}},
		{T: frameDone, JSON: json.RawMessage(`"v"`), Heap: 1},
	} {
		buf.Reset()
		if err := fw.write(fr); err != nil {
			f.Fatal(err)
		}
		f.Add(append([]byte(nil), buf.Bytes()...))
	}
	f.Add([]byte{0, 0, 0, 2, '{', '}'})
	f.Add([]byte{0x10, 0, 0, 0})
	f.Fuzz(func(t *testing.T, in []byte) {
		r := bytes.NewReader(in)
		for {
			fr, err := readFrame(r)
			if err != nil {
				return
			}
			if fr.T == "" {
				t.Fatal("a frame without a type was accepted")
			}
			var out bytes.Buffer
			if err := newFrameWriter(&out).write(fr); err != nil {
				t.Fatalf("a decoded frame does not encode: %v", err)
			}
		}
	})
}
