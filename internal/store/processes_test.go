package store_test

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/store"
)

const (
	mainV1 = `{"nodes":[{"id":"fetch_flights","type":"task"}],"edges":[]}`
	mainV2 = `{"nodes":[{"id":"fetch_flights","type":"task"},{"id":"send_email","type":"task"}],"edges":[{"from":"fetch_flights","to":"send_email"}]}`
)

// processCatalog is a catalog with one process for tenant.
func processCatalog(tenant, description, def, schema string) agent.Catalog {
	p := agent.Process{Tag: "main", Description: description, Definition: json.RawMessage(def)}
	if schema != "" {
		p.Schema = json.RawMessage(schema)
	}
	return agent.Catalog{Tenants: []agent.TenantCatalog{{TenantID: tenant, Processes: []agent.Process{p}}}}
}

// patchOf is a patch of tenant demo's main by call callID of job-1.
func patchOf(callID string, from int) agent.ProcessPatch {
	return agent.ProcessPatch{TenantID: "demo", Tag: "main", JobID: "job-1", WorkflowID: "turn/demo/job-1", CallID: callID,
		Description: "add an email", Operations: json.RawMessage(`[{"op":"add","path":"/nodes/-","value":{"id":"send_email","type":"task"}}]`),
		FromVersion: from}
}

func processChange(t *testing.T, r store.ApplyReport) store.Change {
	t.Helper()
	for _, c := range r.Changes {
		if c.Kind == store.KindProcess {
			return c
		}
	}
	t.Fatalf("no process change in %v", r.Changes)
	return store.Change{}
}

// TestProcessVersions: the catalog gives version 1; a patch makes 2 with
// its audit (the approver from the approvals table); the catalog applied
// again unchanged keeps the patch the latest; a changed catalog entry is a
// new version that says which patched versions it supersedes; one equal
// to the latest is adopted without a version.
func TestProcessVersions(t *testing.T) {
	t.Parallel()
	s := open(t, store.Options{})
	ctx := t.Context()

	r, err := s.ApplyCatalog(ctx, processCatalog("demo", "flight prices", mainV1, ""), false)
	require.NoError(t, err)
	require.Equal(t, store.Change{Kind: store.KindProcess, TenantID: "demo", Name: "main", Action: store.ActionCreated, Version: 1}, processChange(t, r))
	v1, err := s.Process(ctx, "demo", "main", 0)
	require.NoError(t, err)
	require.Equal(t, 1, v1.Version)
	require.Equal(t, 1, v1.Latest)
	require.Equal(t, agent.ProcessFromCatalog, v1.Source)
	require.Equal(t, "flight prices", v1.Description)
	require.JSONEq(t, mainV1, string(v1.Definition))
	require.Empty(t, v1.PatchID)

	// The call was approved by ana; the patch records her.
	at := time.Now()
	require.NoError(t, s.RecordApproval(ctx, agent.ApprovalRecord{TenantID: "demo", JobID: "job-1", CallID: "call-1",
		Tool: "patch_workflow", Outcome: agent.ApprovalApproved, Approver: "ana", Via: "update", RequestedAt: at, DecidedAt: at}))
	p, err := s.PatchProcess(ctx, patchOf("call-1", 1), json.RawMessage(mainV2))
	require.NoError(t, err)
	require.Equal(t, store.PatchID("demo", "job-1", "call-1"), p.PatchID)
	require.Equal(t, 1, p.FromVersion)
	require.Equal(t, 2, p.ToVersion)
	require.Equal(t, "ana", p.Approver)
	require.Equal(t, "turn/demo/job-1", p.WorkflowID)
	require.False(t, p.CreatedAt.IsZero())

	// A retried call gets its patch back and writes nothing.
	again, err := s.PatchProcess(ctx, patchOf("call-1", 1), json.RawMessage(mainV2))
	require.NoError(t, err)
	require.Equal(t, p.PatchID, again.PatchID)
	require.Equal(t, 2, again.ToVersion)
	require.Equal(t, 2, count(t, s, `SELECT count(*) FROM process_versions`))
	got, err := s.ProcessPatchOf(ctx, "demo", "job-1", "call-1")
	require.NoError(t, err)
	require.Equal(t, p.PatchID, got.PatchID)
	require.JSONEq(t, string(patchOf("call-1", 1).Operations), string(got.Operations))
	_, err = s.ProcessPatchOf(ctx, "demo", "job-1", "call-9")
	requireCode(t, err, agent.CodeNotFound)

	latest, err := s.Process(ctx, "demo", "main", 0)
	require.NoError(t, err)
	require.Equal(t, 2, latest.Version)
	require.Equal(t, agent.ProcessFromPatch, latest.Source)
	require.Equal(t, p.PatchID, latest.PatchID)
	require.JSONEq(t, mainV2, string(latest.Definition))
	old, err := s.Process(ctx, "demo", "main", 1)
	require.NoError(t, err)
	require.JSONEq(t, mainV1, string(old.Definition), "versions are immutable")
	require.Equal(t, 2, old.Latest)

	// The catalog applied again, unchanged: the patch stays the latest.
	r, err = s.ApplyCatalog(ctx, processCatalog("demo", "flight prices", mainV1, ""), false)
	require.NoError(t, err)
	require.Equal(t, store.Change{Kind: store.KindProcess, TenantID: "demo", Name: "main", Action: store.ActionUnchanged, Version: 2}, processChange(t, r))
	require.False(t, r.Changed())

	// A new description changes the process, not its versions.
	r, err = s.ApplyCatalog(ctx, processCatalog("demo", "flight prices, watched", mainV1, ""), false)
	require.NoError(t, err)
	require.Equal(t, store.Change{Kind: store.KindProcess, TenantID: "demo", Name: "main", Action: store.ActionUpdated, Version: 2}, processChange(t, r))

	// A changed entry is a new version from the catalog; a dry run says
	// which patched version it supersedes, and writes nothing.
	changed := `{"nodes":[{"id":"fetch_flights","type":"task","config":{"every":"1h"}}],"edges":[]}`
	r, err = s.ApplyCatalog(ctx, processCatalog("demo", "flight prices, watched", changed, ""), true)
	require.NoError(t, err)
	require.Equal(t, store.Change{Kind: store.KindProcess, TenantID: "demo", Name: "main", Action: store.ActionUpdated, Version: 3,
		Note: "supersedes patched v2, kept in the history"}, processChange(t, r))
	require.Equal(t, 2, count(t, s, `SELECT count(*) FROM process_versions`))
	r, err = s.ApplyCatalog(ctx, processCatalog("demo", "flight prices, watched", changed, ""), false)
	require.NoError(t, err)
	require.Equal(t, 3, processChange(t, r).Version)
	v3, err := s.Process(ctx, "demo", "main", 0)
	require.NoError(t, err)
	require.Equal(t, agent.ProcessFromCatalog, v3.Source)
	require.JSONEq(t, changed, string(v3.Definition))

	// Patch it, then copy the patched definition into the catalog: it is
	// adopted, no version is made.
	p4 := patchOf("call-2", 3)
	_, err = s.PatchProcess(ctx, p4, json.RawMessage(mainV2))
	require.NoError(t, err)
	r, err = s.ApplyCatalog(ctx, processCatalog("demo", "flight prices, watched", mainV2, ""), false)
	require.NoError(t, err)
	require.Equal(t, store.Change{Kind: store.KindProcess, TenantID: "demo", Name: "main", Action: store.ActionUpdated, Version: 4,
		Note: "the catalog now matches v4"}, processChange(t, r))

	// A schema change alone is a new version too.
	r, err = s.ApplyCatalog(ctx, processCatalog("demo", "flight prices, watched", mainV2, `{"required":["nodes"]}`), false)
	require.NoError(t, err)
	require.Equal(t, store.Change{Kind: store.KindProcess, TenantID: "demo", Name: "main", Action: store.ActionUpdated, Version: 5}, processChange(t, r))
	v5, err := s.Process(ctx, "demo", "main", 5)
	require.NoError(t, err)
	require.JSONEq(t, `{"required":["nodes"]}`, string(v5.Schema))

	hist, err := s.ProcessHistory(ctx, "demo", "main")
	require.NoError(t, err)
	var sources []string
	for i, e := range hist {
		require.Equal(t, i+1, e.Version.Version)
		require.Equal(t, 5, e.Version.Latest)
		sources = append(sources, e.Version.Source)
		require.Equal(t, e.Version.Source == agent.ProcessFromPatch, e.Patch != nil)
	}
	require.Equal(t, []string{"catalog", "patch", "catalog", "patch", "catalog"}, sources)
	require.Equal(t, p.PatchID, hist[1].Patch.PatchID)
	require.Equal(t, "ana", hist[1].Patch.Approver)
	require.Equal(t, "add an email", hist[1].Patch.Description)
	require.Equal(t, "job-1", hist[1].Patch.JobID)
	require.Equal(t, "call-1", hist[1].Patch.CallID)
	require.Equal(t, 1, hist[1].Patch.FromVersion)
	require.Empty(t, hist[3].Patch.Approver, "a call without an approval records none")

	list, err := s.Processes(ctx, "demo")
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, 5, list[0].Version)

	// What is not there is named.
	_, err = s.Process(ctx, "demo", "main", 9)
	requireCode(t, err, agent.CodeNotFound)
	require.ErrorContains(t, err, `process "main" has no version 9; its versions are 1 to 5`)
	_, err = s.Process(ctx, "demo", "nightly", 0)
	requireCode(t, err, agent.CodeNotFound)
	require.ErrorContains(t, err, `tenant "demo" has no process "nightly"; its processes: main`)
	_, err = s.ProcessHistory(ctx, "demo", "nightly")
	requireCode(t, err, agent.CodeNotFound)
	_, err = s.PatchProcess(ctx, agent.ProcessPatch{TenantID: "demo", Tag: "nightly", JobID: "j", CallID: "c", FromVersion: 1,
		Operations: json.RawMessage(`[]`)}, json.RawMessage(mainV1))
	requireCode(t, err, agent.CodeNotFound)
}

// TestProcessPatchCompareAndSet: two patches of the same version, one
// wins and the other is refused with Conflict — not lost, not applied on
// top of the wrong version; many concurrent patches, each retried on
// Conflict from the latest version, all land, one version each.
func TestProcessPatchCompareAndSet(t *testing.T) {
	t.Parallel()
	s := open(t, store.Options{})
	ctx := t.Context()
	_, err := s.ApplyCatalog(ctx, processCatalog("demo", "", mainV1, ""), false)
	require.NoError(t, err)

	_, err = s.PatchProcess(ctx, patchOf("a", 1), json.RawMessage(mainV2))
	require.NoError(t, err)
	_, err = s.PatchProcess(ctx, patchOf("b", 1), json.RawMessage(mainV2))
	requireCode(t, err, agent.CodeConflict)
	require.ErrorContains(t, err, `process "main" is at version 2, not 1: another patch came first`)
	_, err = s.ProcessPatchOf(ctx, "demo", "job-1", "b")
	requireCode(t, err, agent.CodeNotFound)

	const n = 8
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			for {
				latest, err := s.Process(ctx, "demo", "main", 0)
				if err != nil {
					errs <- err
					return
				}
				def := fmt.Sprintf(`{"nodes":[{"id":"n%d","type":"task"}],"edges":[]}`, i)
				_, err = s.PatchProcess(ctx, patchOf(fmt.Sprint("c", i), latest.Version), json.RawMessage(def))
				if agent.IsCode(err, agent.CodeConflict) {
					continue
				}
				errs <- err
				return
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	hist, err := s.ProcessHistory(ctx, "demo", "main")
	require.NoError(t, err)
	require.Len(t, hist, 2+n)
	seen := map[string]bool{}
	for i, e := range hist[2:] {
		require.NotNil(t, e.Patch)
		require.Equal(t, i+2, e.Patch.FromVersion, "each patch was made on the version before it")
		seen[e.Patch.CallID] = true
	}
	require.Len(t, seen, n, "no patch was lost")
}

// TestProcessTenants: a tenant sees, patches and lists only its own
// processes, even with the same tag and job ids.
func TestProcessTenants(t *testing.T) {
	t.Parallel()
	s := open(t, store.Options{})
	ctx := t.Context()
	_, err := s.ApplyCatalog(ctx, processCatalog("demo", "demo's", mainV1, ""), false)
	require.NoError(t, err)
	_, err = s.ApplyCatalog(ctx, processCatalog("acme", "acme's", mainV2, ""), false)
	require.NoError(t, err)

	p := patchOf("call-1", 1)
	p.TenantID = "acme"
	_, err = s.PatchProcess(ctx, p, json.RawMessage(mainV1))
	require.NoError(t, err)

	demo, err := s.Process(ctx, "demo", "main", 0)
	require.NoError(t, err)
	require.Equal(t, 1, demo.Version)
	require.Equal(t, "demo's", demo.Description)
	require.JSONEq(t, mainV1, string(demo.Definition))
	acme, err := s.Process(ctx, "acme", "main", 0)
	require.NoError(t, err)
	require.Equal(t, 2, acme.Version)
	require.Equal(t, "acme's", acme.Description)

	_, err = s.ProcessPatchOf(ctx, "demo", "job-1", "call-1")
	requireCode(t, err, agent.CodeNotFound)
	hist, err := s.ProcessHistory(ctx, "demo", "main")
	require.NoError(t, err)
	require.Len(t, hist, 1)
	_, err = s.Process(ctx, "other", "main", 0)
	requireCode(t, err, agent.CodeNotFound)
	require.ErrorContains(t, err, `tenant "other" has no process "main" (it has none)`)
	list, err := s.Processes(ctx, "other")
	require.NoError(t, err)
	require.Empty(t, list)
}

func TestProcessInput(t *testing.T) {
	t.Parallel()
	s := open(t, store.Options{})
	ctx := t.Context()
	_, err := s.ApplyCatalog(ctx, processCatalog("demo", "", `{"nodes":`, ""), false)
	requireCode(t, err, agent.CodeInvalid)
	_, err = s.ApplyCatalog(ctx, processCatalog("demo", "", mainV1, ""), false)
	require.NoError(t, err)
	for name, p := range map[string]agent.ProcessPatch{
		"no call":      {TenantID: "demo", Tag: "main", JobID: "j", FromVersion: 1, Operations: json.RawMessage(`[]`)},
		"no version":   {TenantID: "demo", Tag: "main", JobID: "j", CallID: "c", Operations: json.RawMessage(`[]`)},
		"bad tag":      {TenantID: "demo", Tag: "a/b", JobID: "j", CallID: "c", FromVersion: 1, Operations: json.RawMessage(`[]`)},
		"no ops":       {TenantID: "demo", Tag: "main", JobID: "j", CallID: "c", FromVersion: 1},
		"empty tenant": {Tag: "main", JobID: "j", CallID: "c", FromVersion: 1, Operations: json.RawMessage(`[]`)},
	} {
		_, err := s.PatchProcess(ctx, p, json.RawMessage(mainV1))
		requireCode(t, err, agent.CodeInvalid)
		require.NotEmpty(t, name)
	}
	require.Equal(t, 1, count(t, s, `SELECT count(*) FROM process_versions`), "nothing was written")
}
