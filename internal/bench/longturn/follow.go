package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// follower reads a turn's stream as a client does — Stream, then Resume
// after the last index it saw whenever the stream breaks — and keeps what
// it saw of each event: whether it came twice, when each step started and
// finished, the steps' usage, the tool calls and how the turn ended.
type follower struct {
	api      pb.AgentServiceClient
	streamID string

	// mu guards what take writes, for progressLine; the rest is read
	// once the follower is done.
	mu sync.Mutex

	seen       []bool // by event index
	last       int64  // the highest index seen
	duplicates int
	resumes    int

	finishes       map[int32]time.Time
	prompt, cached int64
	toolCalls      int
	text           strings.Builder
	status         pb.Status
	failure        string
}

func newFollower(api pb.AgentServiceClient, streamID string) *follower {
	return &follower{api: api, streamID: streamID, seen: make([]bool, 1, 1<<16),
		finishes: map[int32]time.Time{}}
}

// resumeTries bounds the resumes in a row that fail before a follower
// gives up.
const resumeTries = 10

// follow starts req with Stream and reads its events until the turn's
// terminal status, resuming a broken stream.
func (f *follower) follow(ctx context.Context, req *pb.TurnRequest) error {
	st, err := f.api.Stream(ctx, &pb.StreamRequest{Turn: req})
	return f.keepUp(ctx, st, err)
}

// drain reads the rest of the turn's events after the last one seen,
// until its terminal status.
func (f *follower) drain(ctx context.Context) error {
	st, err := f.api.Resume(ctx, &pb.ResumeRequest{StreamId: f.streamID, AfterIndex: f.last})
	return f.keepUp(ctx, st, err)
}

// keepUp reads st (or, when err says it could not be opened, resumes)
// until the turn's terminal status.
func (f *follower) keepUp(ctx context.Context, st grpcStream, err error) error {
	failed := 0
	for {
		if err == nil {
			err = f.read(st)
			if f.ended() {
				return nil
			}
			if err == nil {
				err = errors.New("the stream ended before the turn")
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if failed++; failed > resumeTries {
			return fmt.Errorf("stream %s: %d resumes failed: %w", f.streamID, resumeTries, err)
		}
		progress("stream broke after event %d (%v); resuming", f.last, err)
		time.Sleep(time.Duration(failed) * 200 * time.Millisecond)
		f.resumes++
		st, err = f.api.Resume(ctx, &pb.ResumeRequest{StreamId: f.streamID, AfterIndex: f.last})
		if err == nil {
			failed = 0
		}
	}
}

// grpcStream is what Stream and Resume return.
type grpcStream interface {
	Recv() (*pb.StreamEvent, error)
}

// read takes events until the stream ends: nil at its end, else why it
// broke.
func (f *follower) read(st grpcStream) error {
	for {
		ev, err := st.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		f.take(ev, time.Now())
	}
}

// take counts an event by its index and keeps what it says.
func (f *follower) take(ev *pb.StreamEvent, at time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	i := ev.GetMeta().GetEventIndex()
	if i < 1 {
		f.failure = fmt.Sprintf("an event with index %d", i)
		return
	}
	for int64(len(f.seen)) <= i {
		f.seen = append(f.seen, false)
	}
	if f.seen[i] {
		f.duplicates++
		return
	}
	f.seen[i], f.last = true, max(f.last, i)
	switch {
	case ev.GetStepFinish() != nil:
		s := ev.GetStepFinish()
		f.finishes[s.GetStep()] = at
		f.prompt += s.GetUsage().GetPromptTokens()
		f.cached += s.GetUsage().GetCachedTokens()
	case ev.GetToolEnd() != nil:
		if ev.GetToolEnd().GetStatus() == "ok" {
			f.toolCalls++
		}
	case ev.GetToken() != nil:
		f.text.WriteString(ev.GetToken().GetText())
	case ev.GetError() != nil:
		f.failure = ev.GetError().GetError().GetType() + ": " + ev.GetError().GetError().GetMessage()
	case ev.GetStatus() != nil:
		f.status = ev.GetStatus().GetStatus()
		if e := ev.GetStatus().GetError(); e != nil && f.failure == "" {
			f.failure = e.GetType() + ": " + e.GetMessage()
		}
	}
}

// progressLine says how far the turn got.
func (f *follower) progressLine() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return fmt.Sprintf("%d steps, %d tool calls, %d events, %d duplicates, %d resumes", len(f.finishes), f.toolCalls, f.last, f.duplicates, f.resumes)
}

// stepsDone is the number of model steps that finished.
func (f *follower) stepsDone() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.finishes)
}

// ended reports whether the turn's terminal status was seen.
func (f *follower) ended() bool {
	switch f.status {
	case pb.Status_STATUS_COMPLETED, pb.Status_STATUS_FAILED, pb.Status_STATUS_CANCELED:
		return true
	}
	return false
}

// missing counts the log's events the follower never got: it reads the
// log's end with ListEvents after the last index it saw, and counts the
// indices up to there it has not seen. It returns the log's last index.
func (f *follower) missing(ctx context.Context) (last int64, missing int, err error) {
	last = f.last
	for {
		page, err := f.api.ListEvents(ctx, &pb.ListEventsRequest{StreamId: f.streamID, AfterIndex: last})
		if err != nil {
			return 0, 0, fmt.Errorf("list events after %d: %w", last, err)
		}
		for _, ev := range page.GetEvents() {
			last = max(last, ev.GetMeta().GetEventIndex())
		}
		if page.GetDone() || len(page.GetEvents()) == 0 {
			break
		}
	}
	for i := int64(1); i <= last; i++ {
		if i >= int64(len(f.seen)) || !f.seen[i] {
			missing++
		}
	}
	return last, missing, nil
}
