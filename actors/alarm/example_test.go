package alarm_test

import (
	"fmt"
	"time"

	"github.com/mcpgrain/mcpgrain/actors/alarm"
)

// A session idle for six minutes with one execution waiting for approval
// keeps its runtime for the three minutes left of its nine-minute paused
// budget; the same session with nothing in flight passivates.
func ExamplePolicy_Decide() {
	p := alarm.DefaultPolicy()

	d := p.Decide(alarm.Input{Idle: 6 * time.Minute, Paused: 1})
	fmt.Println(d.Outcome, d.Lease)

	d = p.Decide(alarm.Input{Idle: 6 * time.Minute})
	fmt.Println(d.Outcome)
	// Output:
	// extend_paused_lease 3m0s
	// destroy_idle_session
}
