// Package upgrade holds the rolling-upgrade tests: a three-node cluster of
// the previous release (tools/previous/COMMIT, built by
// tools/previous/build.sh, its path in MCPGRAIN_PREVIOUS_BIN) under
// traffic, with open sessions, paused executions, running tasks and
// pending reminders, is upgraded one node at a time to the current build
// with the drain docs/operations.md documents; and the store migrations
// added since the previous release are checked to be expand-only. See
// docs/operations.md, "Upgrading: one node at a time".
package upgrade
