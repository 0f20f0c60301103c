// Package layers checks mcpgrain's import graph: its test fails when a
// package imports one from a higher layer, or when the HTTP gateway links
// the sandbox. The layers, bottom up, are listed in [Order]. It also
// checks the code's shape: no function outside tests and generated code
// is longer than 80 lines, its data literals aside.
package layers

// Order is mcpgrain's layers, bottom up, by package path prefix (the
// longest matching prefix wins). A package may import packages of its own
// layer and of lower ones only. The empty prefix is the module root
// package alone.
var Order = []string{
	"proto",
	"tracing",
	"cluster",
	"exchange",
	"actors",
	"gateway",
	"internal",
	"", // the module root: package mcpgrain, the public SDK (docs/sdk.md)
	"cmd",
	"examples",
}
