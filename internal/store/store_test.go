package store_test

import (
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/devstack/devtest"
	"github.com/agentflow/agentflow/internal/store"
)

// migrationCount is the number of files in migrations/.
func migrationCount(t *testing.T) int {
	files, err := filepath.Glob(filepath.Join("migrations", "*.sql"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	return len(files)
}

func TestOpenMigrates(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		opens int // concurrent Opens per round
	}{
		{name: "sequential", opens: 1},
		{name: "concurrent", opens: 2},
		{name: "many concurrent", opens: 6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			url := devtest.Database(t)
			core, logs := observer.New(zapcore.InfoLevel)
			log := zap.New(core)

			// Two rounds: the first applies every migration exactly once,
			// however many Opens race; the second applies nothing.
			for round := range 2 {
				var wg sync.WaitGroup
				stores := make([]*store.Store, tt.opens)
				errs := make([]error, tt.opens)
				for i := range tt.opens {
					wg.Go(func() {
						stores[i], errs[i] = store.Open(t.Context(), url, store.Options{Logger: log})
					})
				}
				wg.Wait()
				for i := range tt.opens {
					require.NoError(t, errs[i], "round %d open %d", round, i)
					t.Cleanup(stores[i].Close)
				}
				require.Equal(t, migrationCount(t), logs.FilterMessage("applying migration").Len(), "round %d", round)
				var version int
				require.NoError(t, stores[0].Pool().QueryRow(t.Context(),
					"SELECT version FROM public.agentflow_schema_version").Scan(&version))
				require.Equal(t, migrationCount(t), version)
				require.Equal(t, 1, count(t, stores[0], "SELECT count(*) FROM public.agentflow_schema_version"))
			}
		})
	}
}

func TestOpenErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		url  string
		code agent.Code
	}{
		{name: "unparsable", url: "postgres://user:secret@host:notaport/db", code: agent.CodeInvalid},
		{name: "nothing listening", url: "postgres://postgres@127.0.0.1:1/x?connect_timeout=2", code: agent.CodeInternal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := store.Open(t.Context(), tt.url, store.Options{})
			requireCode(t, err, tt.code)
			require.NotContains(t, err.Error(), "secret")
		})
	}
}

func TestValidationBeforeDatabase(t *testing.T) {
	t.Parallel()
	// A closed store fails every query; CodeInvalid proves the input was
	// rejected before any of them ran.
	s := open(t, store.Options{})
	s.Close()
	ctx := t.Context()
	msg := []agent.Message{{Role: agent.RoleUser, Content: "hi"}}
	tests := []struct {
		name string
		call func() error
	}{
		{"active agent without tenant", func() error { _, err := s.ActiveAgent(ctx, "", "a"); return err }},
		{"active agent without agent", func() error { _, err := s.ActiveAgent(ctx, "t", ""); return err }},
		{"agent version zero", func() error { _, err := s.AgentVersion(ctx, "t", "a", 0); return err }},
		{"default agent without tenant", func() error { _, err := s.DefaultAgent(ctx, ""); return err }},
		{"list agents with slash", func() error { _, err := s.ListAgents(ctx, "a/b"); return err }},
		{"begin turn without job", func() error {
			return s.BeginTurn(ctx, store.Turn{TenantID: "t", WorkflowID: "w", AgentID: "a", AgentVersion: 1})
		}},
		{"begin turn without workflow", func() error {
			return s.BeginTurn(ctx, store.Turn{TenantID: "t", JobID: "j", AgentID: "a", AgentVersion: 1})
		}},
		{"begin turn without version", func() error {
			return s.BeginTurn(ctx, store.Turn{TenantID: "t", JobID: "j", WorkflowID: "w", AgentID: "a"})
		}},
		{"turn without tenant", func() error { _, err := s.Turn(ctx, "", "j"); return err }},
		{"put step without job", func() error { return s.PutStep(ctx, "t", "", 0, msg[0]) }},
		{"put step negative seq", func() error { return s.PutStep(ctx, "t", "j", -1, msg[0]) }},
		{"steps without tenant", func() error { _, err := s.Steps(ctx, "", "j"); return err }},
		{"append without session", func() error { return s.AppendSession(ctx, "t", "", "j", msg) }},
		{"append without job", func() error { return s.AppendSession(ctx, "t", "s", "", msg) }},
		{"session negative limit", func() error { _, err := s.SessionMessages(ctx, "t", "s", -1); return err }},
		{"save result without tenant", func() error {
			_, err := s.SaveResult(ctx, "", "w", agent.TurnResult{JobID: "j", Status: agent.StatusCompleted}, agent.TurnRequest{})
			return err
		}},
		{"save result unknown status", func() error {
			_, err := s.SaveResult(ctx, "t", "w", agent.TurnResult{JobID: "j", Status: "done"}, agent.TurnRequest{})
			return err
		}},
		{"save result of another tenant's request", func() error {
			_, err := s.SaveResult(ctx, "t", "w", agent.TurnResult{JobID: "j", Status: agent.StatusCompleted}, agent.TurnRequest{TenantID: "u"})
			return err
		}},
		{"save result bad preview", func() error {
			_, err := s.SaveResult(ctx, "t", "w", agent.TurnResult{JobID: "j", Status: agent.StatusCompleted, ResultPreview: []byte("{")}, agent.TurnRequest{})
			return err
		}},
		{"result without job", func() error { _, err := s.Result(ctx, "t", ""); return err }},
		{"result by unknown scheme", func() error { _, err := s.ResultByRef(ctx, "t", "s3://bucket/key"); return err }},
		{"result by bad artifact id", func() error { _, err := s.ResultByRef(ctx, "t", "artifact://not-a-uuid"); return err }},
		{"result by short cas", func() error { _, err := s.ResultByRef(ctx, "t", "cas://sha256:abc"); return err }},
		{"blob by other scheme", func() error { _, err := s.Blob(ctx, "artifact://0b5f3a9e-3c43-4c0e-9d5c-1b8d8f4c9a10"); return err }},
		{"blob uppercase hex", func() error {
			_, err := s.Blob(ctx, "cas://sha256:E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855")
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			requireCode(t, tt.call(), agent.CodeInvalid)
		})
	}
}
