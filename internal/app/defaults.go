package app

import "time"

// DefaultShutdownTimeout bounds a graceful stop when
// [Config].ShutdownTimeout is zero; a node's --shutdown-timeout defaults to
// it.
const DefaultShutdownTimeout = 30 * time.Second
