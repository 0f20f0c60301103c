package toolpacks

import "github.com/mcpgrain/mcpgrain/actors/tasks"

// taskSupport is the task support of the tools that have one: code
// mode's execute (a long execution, or one that pauses for approval, is
// best followed as a task) and the fixtures.
var taskSupport = map[string]tasks.Support{
	"execute":             {Mode: tasks.Optional},
	"slow_compute":        {Mode: tasks.Optional},
	"failing_job":         {Mode: tasks.Required},
	"protocol_error_job":  {Mode: tasks.Optional},
	"confirm_delete":      {Mode: tasks.Optional},
	"multi_input":         {Mode: tasks.Optional},
	"test_tool_with_task": {Mode: tasks.Required, AfterInput: true},
}

// TaskSupport is the task support of a tool of the packs (the conformance
// fixtures', actors/toolpacks/conformance; other tools answer in their
// request).
func TaskSupport(tool string) tasks.Support { return taskSupport[tool] }
