package agent

import (
	"encoding/json"
	"fmt"
	"time"
)

// KindWorkflow is the tool kind whose calls are child workflows on a
// team's task queue, for tools that wait (days, people, other systems):
// the turn starts one per call, under an id of the call's, and waits for
// its result durably.
const KindWorkflow = "workflow"

// Parent close policies of a workflow tool's child: what becomes of a
// call still running when its turn closes.
const (
	// ParentCloseRequestCancel, the default: the child is asked to
	// cancel, and ends as its code decides.
	ParentCloseRequestCancel = "request_cancel"
	ParentCloseTerminate     = "terminate"
	ParentCloseAbandon       = "abandon"
)

// MaxWorkflowToolSec bounds a workflow tool's execution timeout: 30 days.
const MaxWorkflowToolSec = 30 * 24 * 3600

// WorkflowTool is a workflow tool's entry, checked: where the turn starts
// a call's child workflow, and with what options.
type WorkflowTool struct {
	TaskQueue    string
	WorkflowType string
	// ExecutionTimeout bounds the child, all its runs.
	ExecutionTimeout time.Duration
	ParentClose      string
}

// workflowToolConfig is the entry's config as a catalog writes it.
type workflowToolConfig struct {
	TaskQueue           string `json:"task_queue"`
	WorkflowType        string `json:"workflow_type"`
	ExecutionTimeoutSec int    `json:"execution_timeout_sec,omitempty"`
	ParentClosePolicy   string `json:"parent_close_policy,omitempty"`
}

// ParseWorkflowTool checks a workflow entry's config; timeout is the
// tool's call timeout, the child's default execution timeout. The turn
// reads it in workflow code: it only decodes and checks.
func ParseWorkflowTool(raw json.RawMessage, timeout time.Duration) (WorkflowTool, error) {
	var c workflowToolConfig
	if err := decodeConfig(KindWorkflow, raw, &c, "task_queue and workflow_type"); err != nil {
		return WorkflowTool{}, err
	}
	if err := requireNames(KindWorkflow, [2]string{"task_queue", c.TaskQueue}, [2]string{"workflow_type", c.WorkflowType}); err != nil {
		return WorkflowTool{}, err
	}
	if c.ExecutionTimeoutSec < 0 || c.ExecutionTimeoutSec > MaxWorkflowToolSec {
		return WorkflowTool{}, Errorf(CodeInvalid, "%s config: execution_timeout_sec is %d, want 1 to %d", KindWorkflow, c.ExecutionTimeoutSec, MaxWorkflowToolSec)
	}
	w := WorkflowTool{TaskQueue: c.TaskQueue, WorkflowType: c.WorkflowType, ExecutionTimeout: timeout, ParentClose: ParentCloseRequestCancel}
	if c.ExecutionTimeoutSec > 0 {
		w.ExecutionTimeout = time.Duration(c.ExecutionTimeoutSec) * time.Second
	}
	switch c.ParentClosePolicy {
	case "":
	case ParentCloseRequestCancel, ParentCloseTerminate, ParentCloseAbandon:
		w.ParentClose = c.ParentClosePolicy
	default:
		return WorkflowTool{}, Errorf(CodeInvalid, "%s config: parent_close_policy %q: want %s (the default), %s or %s",
			KindWorkflow, c.ParentClosePolicy, ParentCloseRequestCancel, ParentCloseTerminate, ParentCloseAbandon)
	}
	return w, nil
}

// String names the call's target, for summaries and logs.
func (w WorkflowTool) String() string {
	return fmt.Sprintf("workflow %s on %s", w.WorkflowType, w.TaskQueue)
}
