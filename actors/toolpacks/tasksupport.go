package toolpacks

import (
	"slices"

	"github.com/mcpgrain/mcpgrain/actors/app"
	"github.com/mcpgrain/mcpgrain/actors/tasks"
)

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

// TaskSupportWith is the task support of the tools of a node serving the
// selected packs among extra (a program's own, e.g. an SDK server's):
// the built-in table's, else the Tasks of a selected pack that declares
// the tool.
func TaskSupportWith(extra []Pack, selected []string) func(tool string) tasks.Support {
	table := map[string]tasks.Support{}
	for _, p := range extra {
		if !slices.Contains(selected, p.Name) {
			continue
		}
		for tool, m := range p.Tasks {
			switch m {
			case app.TaskOptional:
				table[tool] = tasks.Support{Mode: tasks.Optional}
			case app.TaskRequired:
				table[tool] = tasks.Support{Mode: tasks.Required}
			}
		}
	}
	return func(tool string) tasks.Support {
		if s, ok := taskSupport[tool]; ok {
			return s
		}
		return table[tool]
	}
}
