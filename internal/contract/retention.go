package contract

import "time"

// Retention's names: a workflow that sweeps what every tenant's TTLs
// have expired (store retention), started by a schedule each worker
// keeps (RetentionScheduleID), or by hand (`starter retention run`).
const (
	// Retention sweeps once: input RetentionInput, result
	// RetentionResult.
	Retention = "Retention"
	// SweepRetention is its one activity, which pages through the work
	// with heartbeats: SweepRetentionInput → RetentionResult.
	SweepRetention = "SweepRetention"
)

// RetentionScheduleID is the id of the schedule that starts the
// Retention of the workers of a task queue: retention/<task queue>; its
// runs are that id, a dash and the time they were due.
func RetentionScheduleID(taskQueue string) string { return "retention/" + taskQueue }

// RetentionInput is a Retention's input; it has no fields yet, so that
// a schedule's stored action stays valid as they come.
type RetentionInput struct{}

// SweepRetentionInput is what one sweep deletes against: rows older than
// Now less their TTL; RunID names the sweep in the audit log.
type SweepRetentionInput struct {
	RunID string    `json:"run_id"`
	Now   time.Time `json:"now"`
}

// RetentionResult is what a sweep deleted, per tenant and kind.
type RetentionResult struct {
	Swept []RetentionSwept `json:"swept,omitempty"`
}

// RetentionSwept is a tenant's deletions of one kind (blobs, results or
// transcripts): Deleted rows of the kind; Freed blobs that went whole
// with them, Objects of which from the object store.
type RetentionSwept struct {
	TenantID string `json:"tenant_id"`
	Kind     string `json:"kind"`
	Deleted  int    `json:"deleted"`
	Freed    int    `json:"freed,omitempty"`
	Objects  int    `json:"objects,omitempty"`
}
