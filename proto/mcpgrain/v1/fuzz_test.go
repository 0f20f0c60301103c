package mcpgrainv1_test

import (
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// Every message another node can send us (all of mcpgrain.v1) decodes
// hostile bytes without panicking, and what decodes re-encodes to the same
// message: a remote peer cannot crash a grain's mailbox with a frame.
func FuzzRemoteMessages(f *testing.F) {
	var types []protoreflect.MessageType
	protoregistry.GlobalTypes.RangeMessages(func(mt protoreflect.MessageType) bool {
		if mt.Descriptor().ParentFile().Package() == "mcpgrain.v1" {
			types = append(types, mt)
		}
		return true
	})
	if len(types) < 20 {
		f.Fatalf("found %d mcpgrain.v1 message types; is the package linked?", len(types))
	}
	for _, m := range []proto.Message{
		&pb.HttpExchange{Method: "POST", Body: []byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`), Principal: &pb.Principal{User: "u", Org: "o"}},
		&pb.ExecutionDecide{ExecutionId: "exec_1", Action: "accept", ContentJson: `{"reason":"x"}`},
		&pb.ProbeAdd{Delta: 1},
	} {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(uint8(0), b)
	}
	f.Add(uint8(3), []byte{0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, which uint8, data []byte) {
		mt := types[int(which)%len(types)]
		m := mt.New().Interface()
		if err := proto.Unmarshal(data, m); err != nil {
			return
		}
		again, err := proto.Marshal(m)
		if err != nil {
			t.Fatalf("%s decoded but does not encode: %v", mt.Descriptor().FullName(), err)
		}
		m2 := mt.New().Interface()
		if err := proto.Unmarshal(again, m2); err != nil || !proto.Equal(m, m2) {
			t.Fatalf("%s does not round-trip: %v", mt.Descriptor().FullName(), err)
		}
	})
}
