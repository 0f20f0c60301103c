package cli

import (
	"net"
	"strconv"
)

func itoa(i int) string { return strconv.Itoa(i) }

type net0 struct{}

func (net0) listen() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }
