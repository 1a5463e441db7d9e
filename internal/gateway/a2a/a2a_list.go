package a2a

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentflow/agentflow/internal/gateway"
)

// A2A 1.0's ListTasks: the caller's tenant's tasks (its turns, listed by
// the core: gateway.Service.ListTurns), the most recently active first,
// each read from its log as GetTask reads it. Filters: contextId (the
// tasks a2aContextOf names it for), status (the task's state, read from
// its log) and statusTimestampAfter (turns still running, and those
// that ended at or after it). A page is at most pageSize tasks (1 to
// 100, 50 when not given); a request reads at most a2aListScan turns, so
// a page may hold fewer when a filter passes over many, and its
// nextPageToken goes on from there. totalSize counts the turns the
// filters select before a task's state is read: with a status filter,
// it counts the running (or the ended) turns, not those in that very
// state. Tasks carry no history; their artifacts only with
// includeArtifacts.

// Bounds of ListTasks.
const (
	a2aListDefault = 50
	a2aListMax     = 100
	// a2aListBatch is how many turns the door asks the core for at a
	// time; a page token names a batch and how far into it the listing
	// has gone.
	a2aListBatch = 100
	// a2aListScan bounds the turns one request reads.
	a2aListScan = 200
)

// a2aListQuery is ListTasks's request, read and checked.
type a2aListQuery struct {
	contextID        string
	state            a2a.TaskState // "": any
	since            time.Time
	pageSize         int
	cursor           a2aCursor
	includeArtifacts bool
}

// a2aCursor is where a listing goes on: the core's token of a batch
// (nil: the first) and how many of its turns have been passed.
type a2aCursor struct {
	Batch []byte `json:"b,omitempty"`
	Skip  int    `json:"s,omitempty"`
}

// v1TaskList is 1.0's ListTasksResponse.
type v1TaskList struct {
	Tasks         []*v1Task `json:"tasks"`
	NextPageToken string    `json:"nextPageToken"`
	PageSize      int       `json:"pageSize"`
	TotalSize     int64     `json:"totalSize"`
}

// decodeA2AV1List reads ListTasks's params (1.0's ListTasksRequest).
func decodeA2AV1List(raw json.RawMessage) (a2aListQuery, error) {
	var req struct {
		Tenant               string          `json:"tenant"`
		ContextID            string          `json:"contextId"`
		Status               json.RawMessage `json:"status"`
		PageSize             *int32          `json:"pageSize"`
		PageToken            string          `json:"pageToken"`
		HistoryLength        *int32          `json:"historyLength"`
		StatusTimestampAfter *time.Time      `json:"statusTimestampAfter"`
		IncludeArtifacts     bool            `json:"includeArtifacts"`
	}
	if len(raw) == 0 || string(raw) == "null" {
		raw = json.RawMessage("{}") // every field is optional
	}
	if err := decodeA2AV1Params(raw, &req); err != nil {
		return a2aListQuery{}, err
	}
	q := a2aListQuery{contextID: req.ContextID, pageSize: a2aListDefault, includeArtifacts: req.IncludeArtifacts}
	if q.contextID != "" {
		if err := checkContextID(q.contextID); err != nil {
			return a2aListQuery{}, err
		}
	}
	if len(req.Status) > 0 && string(req.Status) != "null" {
		state, err := v1StateNamed(req.Status)
		if err != nil {
			return a2aListQuery{}, err
		}
		q.state = state
	}
	if req.PageSize != nil {
		if *req.PageSize < 1 || *req.PageSize > a2aListMax {
			return a2aListQuery{}, fmt.Errorf("params.pageSize is %d: want 1 to %d: %w", *req.PageSize, a2aListMax, a2a.ErrInvalidParams)
		}
		q.pageSize = int(*req.PageSize)
	}
	if req.HistoryLength != nil && *req.HistoryLength < 0 {
		return a2aListQuery{}, fmt.Errorf("params.historyLength is %d: want 0 or more: %w", *req.HistoryLength, a2a.ErrInvalidParams)
	}
	if req.StatusTimestampAfter != nil {
		q.since = *req.StatusTimestampAfter
	}
	if req.PageToken != "" {
		c, err := decodeA2ACursor(req.PageToken)
		if err != nil {
			return a2aListQuery{}, err
		}
		q.cursor = c
	}
	return q, nil
}

// v1StateNamed is the state a ListTasks status names: 1.0's name of it
// (v1States), or its number, as ProtoJSON allows. TASK_STATE_UNSPECIFIED
// (0) is any state.
func v1StateNamed(raw json.RawMessage) (a2a.TaskState, error) {
	var name string
	if json.Unmarshal(raw, &name) != nil {
		var n int
		if json.Unmarshal(raw, &n) != nil {
			return "", fmt.Errorf("params.status must be a task state's name or number: %w", a2a.ErrInvalidParams)
		}
		name = strconv.Itoa(n)
	}
	if name == "TASK_STATE_UNSPECIFIED" || name == "0" {
		return "", nil
	}
	for state, v1 := range v1States {
		if name == v1 || name == strconv.Itoa(v1StateNumbers[v1]) {
			return state, nil
		}
	}
	return "", fmt.Errorf("params.status %s is not a task state: %w", gateway.Clip(name), a2a.ErrInvalidParams)
}

// v1StateNumbers are the numbers of 1.0's task states (a2a.proto's
// TaskState).
var v1StateNumbers = map[string]int{
	"TASK_STATE_SUBMITTED": 1, "TASK_STATE_WORKING": 2, "TASK_STATE_COMPLETED": 3, "TASK_STATE_FAILED": 4,
	"TASK_STATE_CANCELED": 5, "TASK_STATE_INPUT_REQUIRED": 6, "TASK_STATE_REJECTED": 7, "TASK_STATE_AUTH_REQUIRED": 8,
}

// errA2APageToken refuses a page token the door did not give.
var errA2APageToken = fmt.Errorf("params.pageToken is not a token ListTasks gave: %w", a2a.ErrInvalidParams)

func decodeA2ACursor(token string) (a2aCursor, error) {
	data, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return a2aCursor{}, errA2APageToken
	}
	var c a2aCursor
	if json.Unmarshal(data, &c) != nil || c.Skip < 0 || c.Skip >= a2aListBatch || (c.Batch == nil && c.Skip == 0) {
		return a2aCursor{}, errA2APageToken
	}
	return c, nil
}

func (c a2aCursor) token() string {
	data, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(data)
}

// listTasks answers ListTasks: a page of the caller's tenant's tasks.
func (m *a2aServer) listTasks(ctx context.Context, q a2aListQuery) (v1TaskList, error) {
	if _, err := m.agent(ctx); err != nil {
		return v1TaskList{}, err
	}
	tq := gateway.TurnQuery{ActiveSince: q.since, PageSize: a2aListBatch}
	if q.contextID != "" {
		// A task's contextId begins its job id (a2aJobSep), or is the
		// job id of a turn started otherwise.
		tq.Job, tq.JobPrefix = q.contextID, q.contextID+a2aJobSep
	}
	if q.state != "" {
		tq.Open = new(!q.state.Terminal())
	}
	total, err := m.s.CountTurns(ctx, tq)
	if err != nil {
		return v1TaskList{}, m.fail(ctx, err, a2a.ErrInvalidParams)
	}
	out := v1TaskList{Tasks: []*v1Task{}, PageSize: q.pageSize, TotalSize: total}
	cur, scanned := q.cursor, 0
	for {
		tq.PageToken = cur.Batch
		batch, err := m.s.ListTurns(ctx, tq)
		if err != nil {
			return v1TaskList{}, m.fail(ctx, err, a2a.ErrInvalidParams)
		}
		for i := cur.Skip; i < len(batch.StreamIDs); i++ {
			if len(out.Tasks) == q.pageSize || scanned == a2aListScan {
				out.NextPageToken = a2aCursor{Batch: cur.Batch, Skip: i}.token()
				return out, nil
			}
			scanned++
			id := batch.StreamIDs[i]
			if q.contextID != "" && a2aContextOf(id) != q.contextID {
				continue
			}
			t, _, _, err := m.readLog(ctx, id)
			if errors.Is(err, a2a.ErrTaskNotFound) {
				continue // gone since it was listed
			}
			if err != nil {
				return v1TaskList{}, err
			}
			if q.state != "" && t.state != q.state {
				continue
			}
			task := v1TaskOf(t.task())
			if !q.includeArtifacts {
				task.Artifacts = nil
			}
			out.Tasks = append(out.Tasks, task)
		}
		if batch.NextPageToken == nil {
			return out, nil
		}
		cur = a2aCursor{Batch: batch.NextPageToken}
	}
}
