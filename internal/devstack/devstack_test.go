package devstack

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap/zaptest"
	"gopkg.in/yaml.v3"
)

// stateDir is a fresh state folder. Not t.TempDir: its parent is private to
// root, and Postgres runs as the postgres user when the tests run as root.
func stateDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "devstack-test-*")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

func TestStackLifecycle(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := stateDir(t)
	opts := Options{Dir: dir, TemporalPort: -1, UIPort: -1, InMemory: true, Logger: zaptest.NewLogger(t),
		Namespaces: nexusOptions.namespaces, NexusEndpoints: nexusOptions.endpoints}

	s, err := Start(ctx, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Stop() })
	requireAsyncNexus(ctx, t, s)

	require.Equal(t, DefaultNamespace, s.Namespace)
	require.Empty(t, s.UIURL, "headless")
	require.Equal(t, []string{
		EnvTestDatabaseURL + "=" + s.DatabaseURL,
		EnvTestTemporalAddress + "=" + s.TemporalAddress,
		EnvTestNamespace + "=default",
		EnvTestTemporalHTTPAddress + "=" + s.TemporalHTTPAddress,
		EnvTestObjectStore + "=" + s.ObjectStore.Endpoint,
		EnvTestPlatformAddrs + "=" + strings.Join(s.PlatformAddrs(), ","),
	}, Env(s))
	requireHTTPAPI(t, s.TemporalHTTPAddress, s.Namespace)

	// Every listener of both servers is reported, each taking
	// connections: those the stack chose by name, the dev server's
	// metrics among them (it would pick that port itself, unknown), and
	// the ports its internal services picked.
	pgURL, err := url.Parse(s.DatabaseURL)
	require.NoError(t, err)
	byWhat := map[string][]string{}
	for _, l := range s.Listeners() {
		byWhat[l.What] = append(byWhat[l.What], l.Addr)
		c, err := net.DialTimeout("tcp", l.Addr, 5*time.Second)
		require.NoError(t, err, "%s (%s)", l.Addr, l.What)
		c.Close()
	}
	require.Equal(t, []string{s.TemporalAddress}, byWhat["the Temporal frontend's gRPC API"])
	require.Equal(t, []string{s.TemporalHTTPAddress}, byWhat["the Temporal frontend's HTTP API"])
	require.Equal(t, []string{pgURL.Host}, byWhat["Postgres"])
	require.Equal(t, []string{strings.TrimPrefix(s.ObjectStore.Endpoint, "http://")}, byWhat["the object store"])
	require.NotEmpty(t, byWhat["an internal port of the temporal dev server"], "%v", byWhat)
	require.Len(t, byWhat["the Temporal dev server's metrics"], 1, "%v", byWhat)
	resp, err := http.Get("http://" + byWhat["the Temporal dev server's metrics"][0] + "/metrics")
	require.NoError(t, err)
	metrics, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Contains(t, string(metrics), "# TYPE ")
	var addrs []string
	for _, l := range s.Listeners() {
		addrs = append(addrs, l.Addr)
	}
	require.Equal(t, addrs, s.PlatformAddrs())

	// Postgres answers, and CreateDatabase reuses an existing database.
	conn, err := pgx.Connect(ctx, s.DatabaseURL)
	require.NoError(t, err)
	var one int
	require.NoError(t, conn.QueryRow(ctx, "SELECT 1").Scan(&one))
	require.Equal(t, 1, one)
	require.NoError(t, conn.Close(ctx))

	dbURL, err := s.CreateDatabase(ctx, "devstack_lifecycle")
	require.NoError(t, err)
	execSQL(ctx, t, dbURL, "CREATE TABLE kept (v text); INSERT INTO kept VALUES ('still here')")
	again, err := s.CreateDatabase(ctx, "devstack_lifecycle")
	require.NoError(t, err)
	require.Equal(t, dbURL, again)
	require.Equal(t, "still here", queryString(ctx, t, again, "SELECT v FROM kept"))
	require.Equal(t, "devstack_lifecycle", queryString(ctx, t, again, "SELECT current_database()"))

	// The frontend is healthy and the search attributes are registered.
	c, err := client.DialContext(ctx, client.Options{HostPort: s.TemporalAddress, Namespace: s.Namespace})
	require.NoError(t, err)
	_, err = c.CheckHealth(ctx, &client.CheckHealthRequest{})
	require.NoError(t, err)
	attrs, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: s.Namespace})
	require.NoError(t, err)
	for _, name := range searchAttributes() {
		require.Equal(t, enums.INDEXED_VALUE_TYPE_KEYWORD, attrs.GetCustomAttributes()[name], name)
	}
	c.Close()

	// A second stack cannot take the same state folder while this one runs.
	_, err = Start(ctx, Options{Dir: dir, SkipTemporal: true})
	require.ErrorContains(t, err, "in use by another running stack")

	// An in-memory server keeps its state in a scratch file, not in the
	// state folder, and the file goes with the stack.
	require.FileExists(t, filepath.Join(s.scratch, "temporal.db"))
	require.NoFileExists(t, filepath.Join(dir, "temporal.db"))

	// Stop is idempotent and really stops both servers.
	require.NoError(t, s.Stop())
	require.NoError(t, s.Stop())
	require.NoDirExists(t, s.scratch)
	requireRefused(t, pgURL.Host)
	requireRefused(t, s.TemporalAddress)

	// A postmaster left running on the data folder by a crashed run is
	// stopped, and the next stack reuses the data folder.
	orphan := startOrphanPostmaster(ctx, t, filepath.Join(dir, "postgres"))
	s2, err := Start(ctx, Options{Dir: dir, SkipTemporal: true, Logger: zaptest.NewLogger(t)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s2.Stop() })
	select {
	case <-orphan:
	case <-time.After(5 * time.Second):
		t.Fatal("orphaned postmaster still running")
	}
	require.Empty(t, s2.TemporalAddress)
	dbURL, err = s2.CreateDatabase(ctx, "devstack_lifecycle")
	require.NoError(t, err)
	require.Equal(t, "still here", queryString(ctx, t, dbURL, "SELECT v FROM kept"))

	require.NoError(t, s2.DropDatabase(ctx, "devstack_lifecycle"))
	require.NoError(t, s2.DropDatabase(ctx, "devstack_lifecycle"), "dropping a missing database is fine")
	require.NoError(t, s2.Stop())
}

// startOrphanPostmaster runs a postmaster on data the way a crashed run
// leaves one behind: no parent-death signal, not owned by any Stack. The
// returned channel closes when it exits.
func startOrphanPostmaster(ctx context.Context, t *testing.T, data string) <-chan struct{} {
	t.Helper()
	bin, err := findPostgres(data)
	require.NoError(t, err)
	cred, err := postgresCredential()
	require.NoError(t, err)
	port, err := freePort()
	require.NoError(t, err)
	cmd := exec.Command(bin.postgres, "-D", data, "-p", strconv.Itoa(port), "-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: cred}
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	dbURL := "postgres://postgres@127.0.0.1:" + strconv.Itoa(port) + "/postgres?sslmode=disable"
	require.Eventually(t, func() bool {
		conn, err := pgx.Connect(ctx, dbURL)
		if err != nil {
			return false
		}
		_ = conn.Close(ctx)
		return true
	}, 30*time.Second, 50*time.Millisecond)
	return exited
}

// TestTemporalFileBacked restarts a file-backed dev server on its database
// file, the way `task up` runs it day after day; a state made before a
// search attribute was added (here: removed) is given it at the start.
func TestTemporalFileBacked(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := stateDir(t)
	opts := Options{Dir: dir, SkipPostgres: true, TemporalPort: -1, UIPort: -1, Namespace: "agentflow-test",
		Logger: zaptest.NewLogger(t)}
	for run := range 2 {
		s, err := Start(ctx, opts)
		require.NoError(t, err, "run %d", run)
		require.Empty(t, s.DatabaseURL)
		c, err := client.DialContext(ctx, client.Options{HostPort: s.TemporalAddress, Namespace: s.Namespace})
		require.NoError(t, err)
		attrs, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: "agentflow-test"})
		require.NoError(t, err)
		for _, name := range searchAttributes() {
			require.Equal(t, enums.INDEXED_VALUE_TYPE_KEYWORD, attrs.GetCustomAttributes()[name], "run %d: %s", run, name)
		}
		if run == 0 {
			_, err = c.OperatorService().RemoveSearchAttributes(ctx, &operatorservice.RemoveSearchAttributesRequest{
				Namespace: "agentflow-test", SearchAttributes: []string{"AgentflowChannel"}})
			require.NoError(t, err)
		}
		c.Close()
		require.NoError(t, s.Stop())
		require.FileExists(t, filepath.Join(dir, "temporal.db"))
	}
}

func TestStartUsesGivenServers(t *testing.T) {
	s, err := Start(context.Background(), Options{
		DatabaseURL:         "postgres://u:p@db.example:5432/app",
		TemporalAddress:     "temporal.example:7233",
		TemporalHTTPAddress: "temporal.example:7243",
		ObjectStoreEndpoint: "http://s3.example:9000",
		Namespace:           "agents",
	})
	require.NoError(t, err)
	require.Equal(t, "postgres://u:p@db.example:5432/app", s.DatabaseURL)
	require.Equal(t, "http://s3.example:9000", s.ObjectStore.Endpoint)
	require.Equal(t, "temporal.example:7233", s.TemporalAddress)
	require.Equal(t, "temporal.example:7243", s.TemporalHTTPAddress)
	require.Equal(t, "agents", s.Namespace)
	require.Empty(t, s.Dir, "nothing started, no state folder")
	require.NoError(t, s.Stop())
}

func TestDatabaseURL(t *testing.T) {
	tests := []struct {
		name, base, db, want, wantErr string
	}{
		{name: "url", base: "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable", db: "t1",
			want: "postgres://postgres@127.0.0.1:5432/t1?sslmode=disable"},
		{name: "postgresql scheme", base: "postgresql://u:p@h/app", db: "other",
			want: "postgresql://u:p@h/other"},
		{name: "keyword/value", base: "host=h user=u dbname=app", db: "it's",
			want: `host=h user=u dbname=app dbname='it\'s'`},
		{name: "empty name", base: "postgres://h/app", db: "", wantErr: "want 1 to 63 bytes"},
		{name: "long name", base: "postgres://h/app", db: strings.Repeat("x", 64), wantErr: "want 1 to 63 bytes"},
		{name: "no postgres", base: "", db: "t1", wantErr: "stack has no postgres"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := (&Stack{DatabaseURL: tt.base}).databaseURL(tt.db)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
			if strings.Contains(tt.base, "://") {
				cfg, err := pgx.ParseConfig(got)
				require.NoError(t, err)
				require.Equal(t, tt.db, cfg.Database)
			}
		})
	}
}

// TestTemporalCLI builds a stand-in module at the CLI's import path, so the
// build is quick, from several callers at once.
func TestTemporalCLI(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	root := t.TempDir()
	tools := filepath.Join(root, "tools")
	require.NoError(t, os.MkdirAll(filepath.Join(tools, "cmd", "temporal"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(tools, "go.mod"), []byte("module github.com/temporalio/cli\n\ngo 1.26\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(tools, "cmd", "temporal", "main.go"),
		[]byte("package main\n\nfunc main() { println(\"stand-in\") }\n"), 0o644))
	t.Setenv("GOFLAGS", "-mod=mod")
	t.Setenv("GOWORK", "off")

	const callers = 3
	paths := make([]string, callers)
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() { paths[i], errs[i] = TemporalCLI(ctx, root) })
	}
	wg.Wait()
	want := filepath.Join(root, ".bin", "temporal")
	for i := range callers {
		require.NoError(t, errs[i])
		require.Equal(t, want, paths[i])
	}
	out, err := exec.Command(want).CombinedOutput()
	require.NoError(t, err)
	require.Equal(t, "stand-in\n", string(out))
	leftovers, err := filepath.Glob(want + ".build-*")
	require.NoError(t, err)
	require.Empty(t, leftovers)

	// Cached: no rebuild while the binary is newer than the tool module.
	before, err := os.Stat(want)
	require.NoError(t, err)
	_, err = TemporalCLI(ctx, root)
	require.NoError(t, err)
	after, err := os.Stat(want)
	require.NoError(t, err)
	require.Equal(t, before.ModTime(), after.ModTime())

	// A newer go.mod (a version bump) rebuilds.
	future := time.Now().Add(time.Hour)
	require.NoError(t, os.Chtimes(filepath.Join(tools, "go.mod"), future, future))
	_, err = TemporalCLI(ctx, root)
	require.NoError(t, err)
	rebuilt, err := os.Stat(want)
	require.NoError(t, err)
	require.True(t, rebuilt.ModTime().After(before.ModTime()))
}

func TestLogTail(t *testing.T) {
	dir := t.TempDir()
	long := filepath.Join(dir, "long.log")
	var b strings.Builder
	for i := range 100 {
		b.WriteString("line " + strconv.Itoa(i) + "\n")
	}
	require.NoError(t, os.WriteFile(long, []byte(b.String()), 0o644))
	empty := filepath.Join(dir, "empty.log")
	require.NoError(t, os.WriteFile(empty, nil, 0o644))

	tests := []struct {
		name, path string
		contains   []string
		excludes   []string
	}{
		{name: "last 20 lines", path: long, contains: []string{"line 80\n", "line 99"}, excludes: []string{"line 79\n"}},
		{name: "empty", path: empty, contains: []string{"is empty"}},
		{name: "missing", path: filepath.Join(dir, "missing.log")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := logTail(tt.path)
			if len(tt.contains) == 0 {
				require.Empty(t, got)
			}
			for _, s := range tt.contains {
				require.Contains(t, got, s)
			}
			for _, s := range tt.excludes {
				require.NotContains(t, got, s)
			}
		})
	}
}

func execSQL(ctx context.Context, t *testing.T, dbURL, sql string) {
	t.Helper()
	conn, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	require.NoError(t, err)
}

func queryString(ctx context.Context, t *testing.T, dbURL, sql string) string {
	t.Helper()
	conn, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var v string
	require.NoError(t, conn.QueryRow(ctx, sql).Scan(&v))
	return v
}

// requireHTTPAPI asserts that the frontend's HTTP API answers at
// hostPort: it describes namespace (and lists and ends its workflows) to
// anyone who asks, which is why it is a platform address tools must never
// reach.
func requireHTTPAPI(t *testing.T, hostPort, namespace string) {
	t.Helper()
	require.NotEmpty(t, hostPort)
	resp, err := http.Get("http://" + hostPort + "/api/v1/namespaces/" + namespace)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	require.Contains(t, string(body), `"name":"`+namespace+`"`)
}

// requireRefused asserts nothing listens at hostPort any more.
func requireRefused(t *testing.T, hostPort string) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", hostPort, time.Second)
	if err == nil {
		conn.Close()
	}
	require.Error(t, err, "%s still accepts connections", hostPort)
}

// The dev server and the compose file's server get the same dynamic config.
func TestDynamicConfigMatchesDeploy(t *testing.T) {
	root, err := RepoRoot()
	require.NoError(t, err)
	data, err := os.ReadFile(filepath.Join(root, "deploy", "temporal-dynamicconfig.yaml"))
	require.NoError(t, err)
	var file map[string][]struct {
		Value any `yaml:"value"`
	}
	require.NoError(t, yaml.Unmarshal(data, &file))
	got := map[string]string{}
	for key, values := range file {
		require.Len(t, values, 1, key)
		got[key] = fmt.Sprint(values[0].Value)
	}
	// The Nexus callback's address is the server's own, a different one
	// for the compose file and each stack (nexusCallbackYAML).
	for _, key := range []string{"component.nexusoperations.callback.endpoint.template", "component.callbacks.allowedAddresses"} {
		require.Contains(t, got, key)
		delete(got, key)
	}
	want := map[string]string{}
	for _, kv := range DynamicConfig() {
		key, value, ok := strings.Cut(kv, "=")
		require.True(t, ok, kv)
		want[key] = value
	}
	require.Equal(t, want, got)

	compose, err := os.ReadFile(filepath.Join(root, "docker-compose.yml"))
	require.NoError(t, err)
	require.Contains(t, string(compose), "./deploy/temporal-dynamicconfig.yaml:/etc/temporal/config/dynamicconfig/agentflow.yaml:ro")
	require.Contains(t, string(compose), "DYNAMIC_CONFIG_FILE_PATH: config/dynamicconfig/agentflow.yaml")
}

// A reserved port stays usable by the server it was found for, for Go's
// listeners and for Postgres and Temporal, which set SO_REUSEADDR the same way.
func TestFreePortIsReservedButBindable(t *testing.T) {
	for range 5 {
		addr, err := FreeAddr()
		require.NoError(t, err)
		ln, err := net.Listen("tcp", addr)
		require.NoError(t, err, "the reserved port must stay bindable")
		require.NoError(t, ln.Close())
	}
}

// A dev server that exited because a port it wanted was taken is told apart
// from one that failed for another reason.
func TestLostPortRace(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		log  string
		lost bool
	}{
		{"panic: listen tcp 127.0.0.1:41234: bind: address already in use", true},
		{"panic: unable to open database", false},
	} {
		logPath := filepath.Join(dir, "temporal.log")
		require.NoError(t, os.WriteFile(logPath, []byte(tc.log), 0o644))
		sv := &service{name: "temporal dev server", logPath: logPath, argv: []string{"/bin/false"}}
		require.NoError(t, sv.start(dir, nil))
		<-sv.proc.done
		// start truncated the log; the process's (empty) output replaced it.
		require.NoError(t, os.WriteFile(logPath, []byte(tc.log), 0o644))
		require.Equal(t, tc.lost, lostPortRace(sv), tc.log)
	}
	require.False(t, lostPortRace(&service{}), "no process")
}

// TestServicePorts: the real server's ports are those of its last start
// while they are free and distinct, else eight new distinct ones — a file
// that names one port twice would have two services bind it, and the
// server would fail the same way at every start.
func TestServicePorts(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer held.Close()
	heldPort := held.Addr().(*net.TCPAddr).Port
	kept, err := freeSmallPorts(8)
	require.NoError(t, err)

	for _, tc := range []struct {
		name  string
		file  []int
		reuse bool
	}{
		{"none yet", nil, false},
		{"kept", kept, true},
		{"one named twice", append(slices.Clone(kept[:7]), kept[0]), false},
		{"one held by another process", append(slices.Clone(kept[:7]), heldPort), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "ports")
			if tc.file != nil {
				var b strings.Builder
				for _, p := range tc.file {
					fmt.Fprintln(&b, p)
				}
				require.NoError(t, os.WriteFile(file, []byte(b.String()), 0o644))
			}
			ports, err := servicePorts(file)
			require.NoError(t, err)
			require.Len(t, ports, 8)
			distinct := slices.Clone(ports)
			slices.Sort(distinct)
			require.Len(t, slices.Compact(distinct), 8, "ports %v", ports)
			require.NotContains(t, ports, heldPort)
			if tc.reuse {
				require.Equal(t, tc.file, ports)
			}
			again, err := servicePorts(file)
			require.NoError(t, err)
			require.Equal(t, ports, again, "the next start reuses them")
		})
	}
}

// A fixed port another process holds is refused up front: whatever runs
// there would answer the readiness check in place of the new server.
func TestTemporalPortInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = Start(ctx, Options{Dir: stateDir(t), TemporalPort: port, UIPort: -1, InMemory: true, Logger: zaptest.NewLogger(t)})
	require.ErrorContains(t, err, fmt.Sprintf("port %d (Temporal) on 127.0.0.1 is in use", port))
}
