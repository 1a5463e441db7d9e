package devtest

import (
	"context"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/agentflow/agentflow/internal/devstack"
	"github.com/agentflow/agentflow/internal/objstore"
)

func TestMain(m *testing.M) { Main(m) }

func TestDatabase(t *testing.T) {
	ctx := t.Context()
	var first string
	t.Run("fresh", func(t *testing.T) {
		first = Database(t)
		second := Database(t)
		require.NotEqual(t, dbName(t, first), dbName(t, second))

		conn, err := pgx.Connect(ctx, first)
		require.NoError(t, err)
		defer conn.Close(ctx)
		var tables int
		require.NoError(t, conn.QueryRow(ctx,
			"SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'").Scan(&tables))
		require.Zero(t, tables, "a new database is empty")
		_, err = conn.Exec(ctx, "CREATE TABLE t (v int)")
		require.NoError(t, err)
	})

	// The subtest's cleanup dropped its databases.
	_, err := pgx.Connect(ctx, first)
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, "3D000", pgErr.Code, "invalid_catalog_name: the database is gone")
}

func TestTemporal(t *testing.T) {
	address, namespace := Temporal(t)
	again, _ := Temporal(t)
	require.Equal(t, address, again, "one server per test binary")
	require.Equal(t, "default", namespace)

	c, err := client.DialContext(t.Context(), client.Options{HostPort: address, Namespace: namespace})
	require.NoError(t, err)
	defer c.Close()
	_, err = c.CheckHealth(t.Context(), &client.CheckHealthRequest{})
	require.NoError(t, err)
}

// TestEnvServers runs this test binary again with the AGENTFLOW_TEST_*
// variables pointing at this binary's servers: the child must use them and
// start nothing. The same test function checks that in the child.
func TestEnvServers(t *testing.T) {
	if given := os.Getenv(devstack.EnvTestDatabaseURL); given != "" {
		dbURL := Database(t)
		require.Equal(t, hostPort(t, given), hostPort(t, dbURL))
		address, namespace := Temporal(t)
		require.Equal(t, os.Getenv(devstack.EnvTestTemporalAddress), address)
		require.Equal(t, "default", namespace)
		cfg := ObjectStore(t)
		require.Equal(t, os.Getenv(devstack.EnvTestObjectStore), cfg.Endpoint)
		require.Nil(t, shared.postgres.stack.Stop(), "nothing to stop")
		require.Nil(t, shared.objects.stack.Stop(), "nothing to stop")
		require.Empty(t, shared.postgres.dir, "no state folder")
		require.Empty(t, shared.temporal.dir, "no state folder")
		require.Empty(t, shared.objects.dir, "no state folder")
		return
	}

	dbURL := Database(t)
	address, namespace := Temporal(t)
	endpoint := ObjectStore(t).Endpoint
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestEnvServers$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(),
		devstack.EnvTestDatabaseURL+"="+dbURL,
		devstack.EnvTestTemporalAddress+"="+address,
		devstack.EnvTestNamespace+"="+namespace,
		devstack.EnvTestObjectStore+"="+endpoint,
	)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "child test run:\n%s", out)
	require.Contains(t, string(out), "--- PASS: TestEnvServers")
}

func TestDatabaseName(t *testing.T) {
	valid := regexp.MustCompile(`^[a-z0-9_]{1,63}$`)
	tests := []struct {
		name, testName, wantPrefix string
	}{
		{name: "subtest", testName: "TestStore/Save result", wantPrefix: "teststore_save_result_"},
		{name: "unicode", testName: "TestÜber", wantPrefix: "test_ber_"},
		{name: "long", testName: "Test" + strings.Repeat("X", 100), wantPrefix: "test" + strings.Repeat("x", 50)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := databaseName(tt.testName), databaseName(tt.testName)
			require.NotEqual(t, a, b, "random suffix")
			for _, got := range []string{a, b} {
				require.Regexp(t, valid, got)
				require.True(t, strings.HasPrefix(got, tt.wantPrefix), got)
			}
		})
	}
}

// TestObjectStore: each test its own bucket, empty, on the shared
// SeaweedFS, deleted with its objects by the test's cleanup.
func TestObjectStore(t *testing.T) {
	ctx := t.Context()
	var first objstore.Config
	t.Run("fresh", func(t *testing.T) {
		first = ObjectStore(t)
		second := ObjectStore(t)
		require.NotEqual(t, first.Bucket, second.Bucket)
		require.Equal(t, first.Endpoint, second.Endpoint, "one server per test binary")
		store, err := objstore.New(ctx, first)
		require.NoError(t, err)
		require.NoError(t, store.Check(ctx))
		objects, err := store.List(ctx, "")
		require.NoError(t, err)
		require.Empty(t, objects, "a new bucket is empty")
		require.NoError(t, store.Put(ctx, "k", strings.NewReader("v"), 1, "text/plain", nil))
	})

	// The subtest's cleanup deleted its buckets, objects and all.
	store, err := objstore.New(ctx, first)
	require.NoError(t, err)
	require.ErrorContains(t, store.Check(ctx), "404")
}

func TestBucketName(t *testing.T) {
	// S3's rules, as SeaweedFS checks them.
	valid := regexp.MustCompile(`^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$`)
	for _, tt := range []struct{ name, testName, wantPrefix string }{
		{name: "subtest", testName: "TestStore/Save result", wantPrefix: "tteststore-save-result-"},
		{name: "underscores", testName: "Test__A", wantPrefix: "ttest-a-"},
		{name: "long", testName: "Test" + strings.Repeat("X", 100), wantPrefix: "ttest" + strings.Repeat("x", 50)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a, b := bucketName(tt.testName), bucketName(tt.testName)
			require.NotEqual(t, a, b, "random suffix")
			for _, got := range []string{a, b} {
				require.Regexp(t, valid, got)
				require.True(t, strings.HasPrefix(got, tt.wantPrefix), got)
			}
		})
	}
}

func dbName(t *testing.T, dbURL string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	return strings.TrimPrefix(u.Path, "/")
}

func hostPort(t *testing.T, dbURL string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	return u.Host
}
