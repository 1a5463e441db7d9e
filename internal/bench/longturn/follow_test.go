package main

import (
	"os"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/require"

	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

func event(index int64, e any) *pb.StreamEvent {
	ev := &pb.StreamEvent{Meta: &pb.StreamEventMeta{EventIndex: index}}
	switch e := e.(type) {
	case *pb.StreamEvent_StepStart:
		ev.Event = e
	case *pb.StreamEvent_StepFinish:
		ev.Event = e
	case *pb.StreamEvent_ToolEnd:
		ev.Event = e
	case *pb.StreamEvent_Status:
		ev.Event = e
	}
	return ev
}

func start(step int32) *pb.StreamEvent_StepStart {
	return &pb.StreamEvent_StepStart{StepStart: &pb.StepEvent{Step: step}}
}

func finish(step int32, prompt, cached int64) *pb.StreamEvent_StepFinish {
	return &pb.StreamEvent_StepFinish{StepFinish: &pb.StepEvent{Step: step,
		Usage: &pb.TokenUsage{PromptTokens: prompt, CachedTokens: cached}}}
}

// TestFollowerCounts: the follower counts an event it gets again as a
// duplicate, keeps the steps' usage and tool calls, times each step from
// the end of the one before it in the order of the steps' numbers, and
// sees the turn end with its terminal status.
func TestFollowerCounts(t *testing.T) {
	f := newFollower(nil, "turn/demo/x")
	t0 := time.Unix(0, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	steps := []struct {
		ev *pb.StreamEvent
		at int
	}{
		{event(1, start(1)), 0},
		{event(2, &pb.StreamEvent_ToolEnd{ToolEnd: &pb.ToolEvent{Status: "ok"}}), 5},
		{event(3, finish(1, 1000, 0)), 10},
		{event(3, finish(1, 1000, 0)), 11}, // again, after a resume
		{event(4, start(3)), 12},           // a tool result took step 2
		{event(5, &pb.StreamEvent_ToolEnd{ToolEnd: &pb.ToolEvent{Status: "error"}}), 20},
		{event(6, finish(3, 1100, 1024)), 40},
		{event(8, finish(5, 1200, 1024)), 45}, // 7 never came
		{event(9, &pb.StreamEvent_Status{Status: &pb.StatusEvent{Status: pb.Status_STATUS_COMPLETED}}), 46},
	}
	for _, s := range steps {
		require.False(t, f.ended())
		f.take(s.ev, at(s.at))
	}
	require.True(t, f.ended())
	require.Equal(t, 1, f.duplicates)
	require.Equal(t, int64(9), f.last)
	require.Equal(t, 1, f.toolCalls, "tool calls that ended ok")
	require.Equal(t, int64(3300), f.prompt)
	require.Equal(t, int64(2048), f.cached)
	require.Equal(t, 3, f.stepsDone())
	unseen := 0
	for i := int64(1); i <= f.last; i++ {
		if !f.seen[i] {
			unseen++
		}
	}
	require.Equal(t, 1, unseen)
}

// TestScriptCounts: the benchmark's script calls the calculator with the
// next number until the bound, then answers, reading the count from the
// calculator's text or from its JSON.
func TestScriptCounts(t *testing.T) {
	m, err := startModel("127.0.0.1:0", 3)
	require.NoError(t, err)
	t.Cleanup(m.close)
	client := openai.NewClient(option.WithBaseURL(m.url()), option.WithAPIKey("k"), option.WithMaxRetries(0))
	params := openai.ChatCompletionNewParams{Model: "scripted-longturn",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Count to 3 with the calculator.")}}
	var args []string
	for _, result := range []string{"1", `{"expression":"1 + 1","result":"2"}`, "3", ""} {
		resp, err := client.Chat.Completions.New(t.Context(), params)
		require.NoError(t, err)
		msg := resp.Choices[0].Message
		if result == "" {
			require.Empty(t, msg.ToolCalls)
			require.Equal(t, "Counted to 3.", msg.Content)
			break
		}
		require.Len(t, msg.ToolCalls, 1)
		require.Equal(t, "calculator", msg.ToolCalls[0].Function.Name)
		args = append(args, msg.ToolCalls[0].Function.Arguments)
		params.Messages = append(params.Messages, msg.ToParam(), openai.ToolMessage(result, msg.ToolCalls[0].ID))
	}
	require.Equal(t, []string{`{"expression": "0 + 1"}`, `{"expression": "1 + 1"}`, `{"expression": "2 + 1"}`}, args)
	require.Equal(t, 4, m.requests)
	require.Positive(t, m.firstBytes)
	require.Greater(t, m.lastBytes, m.firstBytes)
	require.Equal(t, m.lastBytes, m.maxSize)
	require.Contains(t, agentYAML(10), "max_iterations: 11")
}

// TestProcessFigures: CPU time and resident memory are read from /proc.
func TestProcessFigures(t *testing.T) {
	cpu, err := cpuMS(os.Getpid())
	require.NoError(t, err)
	require.GreaterOrEqual(t, cpu, 0.0)
	rss, err := rssMiB(os.Getpid(), os.Getpid())
	require.NoError(t, err)
	require.Greater(t, rss, 1.0)
	_, err = cpuMS(-1)
	require.Error(t, err)
}

// TestStepTimes: step times from the model's side are the gaps between
// its requests, and the report takes medians and 99th percentiles of the
// first and last thousand, and their ratio.
func TestStepTimes(t *testing.T) {
	m := &model{}
	start := time.Unix(0, 0)
	for _, gap := range []int{0, 10, 30, 5} {
		start = start.Add(time.Duration(gap) * time.Millisecond)
		m.arrivals = append(m.arrivals, start)
	}
	require.Equal(t, []float64{10, 30, 5}, m.stepTimes())

	steps := make([]float64, 3000)
	for i := range steps {
		steps[i] = 10
		if i >= 2000 {
			steps[i] = 12
		}
	}
	steps[999], steps[2999] = 100, 200
	var r report
	r.fromSteps(steps)
	require.Equal(t, 10.0, r.StepP50First1000)
	require.Equal(t, 12.0, r.StepP50Last1000)
	require.Equal(t, 10.0, r.StepP99First1000, "one slow step in a thousand is above the 99th percentile")
	require.Equal(t, 1.2, r.StepLastFirst)
	require.Equal(t, 10.0, r.StepP50First100)
	require.Equal(t, 12.0, r.StepP50Last100)
	require.Equal(t, 100.0, percentile([]float64{1, 2, 100}, 0.99))
}
