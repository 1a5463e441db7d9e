package devstack

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"go.uber.org/zap"
)

const (
	postgresStartTimeout = time.Minute
	// postgresGrace bounds a fast shutdown (SIGINT: abort sessions, checkpoint).
	postgresGrace = 15 * time.Second
	// maxSocketPath is the room in sockaddr_un.sun_path, less the NUL byte.
	maxSocketPath = 107
)

// EnvStatStatements, set to true, loads pg_stat_statements into the
// stack's PostgreSQL, so that a benchmark can count the statements a turn
// makes (CREATE EXTENSION pg_stat_statements, then read the view). Off by
// default: it costs a little on every statement.
const EnvStatStatements = "AGENTFLOW_PG_STAT_STATEMENTS"

// startPostgres initialises Dir/postgres once and runs a postmaster on it.
func (s *Stack) startPostgres(ctx context.Context, port int, durable bool) error {
	begin := time.Now()
	data := filepath.Join(s.Dir, "postgres")
	bin, err := findPostgres(data)
	if err != nil {
		return err
	}
	cred, err := postgresCredential()
	if err != nil {
		return err
	}
	sv, err := s.claimPostgres(ctx)
	if err != nil {
		return err
	}

	created, err := initPostgres(ctx, bin, data, cred)
	if err != nil {
		return err
	}
	if err := stopOrphanPostmaster(ctx, data); err != nil {
		return err
	}
	if err := chownTree(data, cred); err != nil {
		return err
	}
	if port == 0 {
		if port, err = freePort(); err != nil {
			return err
		}
	}
	sv.argv = postmasterArgv(bin, data, port, durable)
	sv.named = []Listener{{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), What: "Postgres"}}
	if err := sv.start(s.Dir, cred); err != nil {
		return err
	}
	proc := sv.proc

	dbURL := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
	waitCtx, cancel := context.WithTimeout(ctx, postgresStartTimeout)
	defer cancel()
	sv.ready = postgresReady(dbURL)
	if err := poll(waitCtx, proc, 50*time.Millisecond, sv.ready); err != nil {
		return err
	}
	s.DatabaseURL = dbURL
	s.log.Info("postgres started", zap.Int("port", port), zap.String("data", data),
		zap.Bool("initialised", created), zap.Duration("took", time.Since(begin)))
	return nil
}

// claimPostgres takes the state folder's Postgres lock and makes a new
// service the stack's Postgres; from then on Stop releases the lock.
func (s *Stack) claimPostgres(ctx context.Context) (*service, error) {
	lock, err := LockFile(ctx, filepath.Join(s.Dir, "postgres.lock"), false)
	if errors.Is(err, errLocked) {
		return nil, fmt.Errorf("postgres data in %s is in use by another running stack; stop it or use another folder", s.Dir)
	}
	if err != nil {
		return nil, err
	}
	sv := &service{name: "postgres", lock: lock, signal: syscall.SIGINT, grace: postgresGrace,
		logPath: filepath.Join(s.Dir, "postgres.log")}
	s.postgres = sv // from here on, Stop releases the lock
	return sv, nil
}

// postmasterArgv is the command line of a postmaster on data at port.
func postmasterArgv(bin pgBinaries, data string, port int, durable bool) []string {
	// TCP is what clients use; the socket is a convenience for psql -h, and
	// only fits when the data folder's path is short enough.
	socketDir := data
	if len(data)+len("/.s.PGSQL.65535") > maxSocketPath {
		socketDir = ""
	}
	argv := []string{bin.postgres, "-D", data, "-p", strconv.Itoa(port),
		"-c", "listen_addresses=127.0.0.1",
		"-c", "unix_socket_directories=" + socketDir,
		"-c", "max_connections=200",
	}
	if v, _ := strconv.ParseBool(os.Getenv(EnvStatStatements)); v {
		argv = append(argv, "-c", "shared_preload_libraries=pg_stat_statements", "-c", "pg_stat_statements.track=all")
	}
	if !durable {
		// Durability is not worth the time in a throwaway dev database.
		argv = append(argv, "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
	}
	return argv
}

// postgresReady reports whether the server at dbURL takes a connection
// within a second.
func postgresReady(dbURL string) func(context.Context) error {
	return func(ctx context.Context) error {
		attemptCtx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		conn, err := pgx.Connect(attemptCtx, dbURL)
		if err != nil {
			return err
		}
		return conn.Close(attemptCtx)
	}
}

// pgBinaries are the server programs of one PostgreSQL installation.
type pgBinaries struct{ initdb, postgres string }

// findPostgres looks for initdb and postgres side by side: first the
// installation matching an existing data folder's version, then PATH, then
// the newest of /usr/lib/postgresql/*/bin (Debian's layout).
func findPostgres(data string) (pgBinaries, error) {
	var dirs []string
	if v, err := os.ReadFile(filepath.Join(data, "PG_VERSION")); err == nil {
		dirs = append(dirs, filepath.Join("/usr/lib/postgresql", strings.TrimSpace(string(v)), "bin"))
	}
	if p, err := exec.LookPath("postgres"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			dirs = append(dirs, filepath.Dir(real))
		}
		dirs = append(dirs, filepath.Dir(p))
	}
	installed, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(installed, func(a, b string) int { return pgMajor(b) - pgMajor(a) })
	dirs = append(dirs, installed...)
	for _, dir := range dirs {
		b := pgBinaries{initdb: filepath.Join(dir, "initdb"), postgres: filepath.Join(dir, "postgres")}
		if isExecutable(b.initdb) && isExecutable(b.postgres) {
			return b, nil
		}
	}
	return pgBinaries{}, errors.New("postgres server binaries (initdb, postgres) not found on PATH or in /usr/lib/postgresql/*/bin: " +
		"install the Debian package postgresql (or postgresql-15), or set DATABASE_URL to an existing server")
}

// pgMajor reads the major version from a /usr/lib/postgresql/<v>/bin path.
func pgMajor(binDir string) int {
	v := filepath.Base(filepath.Dir(binDir))
	major, _ := strconv.Atoi(strings.SplitN(v, ".", 2)[0])
	return major
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// postgresCredential is whom the Postgres programs run as: nil (this user)
// unless this process is root, which initdb and postgres refuse to be.
func postgresCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root, postgres must run as the postgres system user, which was not found (%w): "+
			"install the Debian package postgresql, run as another user, or set DATABASE_URL", err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("parse uid of user postgres: %w", err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("parse gid of user postgres: %w", err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// initPostgres creates the data folder unless it exists. initdb runs in a
// scratch folder that is renamed into place, so a crash mid-way leaves no
// half-made data folder behind.
func initPostgres(ctx context.Context, bin pgBinaries, data string, cred *syscall.Credential) (created bool, err error) {
	if _, err := os.Stat(filepath.Join(data, "PG_VERSION")); err == nil {
		return false, nil
	}
	if entries, err := os.ReadDir(data); err == nil && len(entries) > 0 {
		return false, fmt.Errorf("%s exists but is not a postgres data folder: remove it", data)
	}
	scratch := data + ".init"
	if err := os.RemoveAll(scratch); err != nil {
		return false, fmt.Errorf("remove stale %s: %w", scratch, err)
	}
	if err := os.Mkdir(scratch, 0o700); err != nil {
		return false, fmt.Errorf("create postgres data folder: %w", err)
	}
	if err := chownTree(scratch, cred); err != nil {
		return false, err
	}
	cmd := exec.CommandContext(ctx, bin.initdb, "-D", scratch, "-A", "trust", "-U", "postgres",
		"--encoding=UTF8", "--no-locale", "--no-sync")
	cmd.Dir = filepath.Dir(data)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if out, err := cmd.CombinedOutput(); err != nil {
		hint := ""
		if cred != nil {
			hint = fmt.Sprintf(" (the postgres user must be able to reach %s)", filepath.Dir(data))
		}
		return false, fmt.Errorf("initdb%s: %w\n%s", hint, err, strings.TrimSpace(string(out)))
	}
	if err := os.RemoveAll(data); err != nil { // an empty folder, checked above
		return false, fmt.Errorf("replace %s: %w", data, err)
	}
	if err := os.Rename(scratch, data); err != nil {
		return false, fmt.Errorf("move postgres data folder into place: %w", err)
	}
	return true, nil
}

// chownTree gives path and everything below it to cred's user, when it does
// not own path already (a folder made by an earlier run as another user).
func chownTree(path string, cred *syscall.Credential) error {
	if cred == nil {
		return nil
	}
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("stat %s: %w", path, err)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid == cred.Uid {
		return nil
	}
	err = filepath.WalkDir(path, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, int(cred.Uid), int(cred.Gid))
	})
	if err != nil {
		return fmt.Errorf("give %s to the postgres user: %w", path, err)
	}
	return nil
}

// stopOrphanPostmaster stops a postmaster still running on data, left behind
// by a run that died without stopping it. The caller holds the data folder's
// lock, so no live Stack owns such a postmaster.
func stopOrphanPostmaster(ctx context.Context, data string) error {
	b, err := os.ReadFile(filepath.Join(data, "postmaster.pid"))
	if err != nil {
		// No pid file: nothing runs. Postgres itself discards a pid file whose
		// process is gone, and checks for leftover shared memory.
		return nil
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	if err != nil || pid <= 0 || !runsIn(pid, data) {
		return nil
	}
	// SIGINT is pg_ctl's "fast" shutdown; SIGQUIT its "immediate" one.
	for _, step := range []struct {
		sig  syscall.Signal
		wait time.Duration
	}{{syscall.SIGINT, postgresGrace}, {syscall.SIGQUIT, 5 * time.Second}, {syscall.SIGKILL, 5 * time.Second}} {
		if err := syscall.Kill(pid, step.sig); err != nil {
			return nil // gone already
		}
		deadline := time.Now().Add(step.wait)
		for runsIn(pid, data) && time.Now().Before(deadline) {
			select {
			case <-ctx.Done():
				return fmt.Errorf("stop orphaned postgres (pid %d): %w", pid, ctx.Err())
			case <-time.After(100 * time.Millisecond):
			}
		}
		if !runsIn(pid, data) {
			return nil
		}
	}
	return fmt.Errorf("orphaned postgres (pid %d) on %s does not stop", pid, data)
}

// runsIn reports whether process pid is alive with its working folder in dir,
// as a postmaster is in its data folder.
func runsIn(pid int, dir string) bool {
	cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
	return err == nil && cwd == dir
}

// CreateDatabase creates database name on the stack's Postgres unless it
// exists, and returns its URL. Tests use it to give each test its own
// database.
func (s *Stack) CreateDatabase(ctx context.Context, name string) (string, error) {
	dbURL, err := s.databaseURL(name)
	if err != nil {
		return "", err
	}
	conn, err := pgx.Connect(ctx, s.DatabaseURL)
	if err != nil {
		return "", fmt.Errorf("create database %q: connect: %w", name, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))

	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return "", fmt.Errorf("create database %q: %w", name, err)
	}
	if exists {
		return dbURL, nil
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		// Lost a race with a concurrent creator: the database exists, as wanted.
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || (pgErr.Code != "42P04" && pgErr.Code != "23505") {
			return "", fmt.Errorf("create database %q: %w", name, err)
		}
	}
	return dbURL, nil
}

// DropDatabase drops database name if it exists, closing its connections.
func (s *Stack) DropDatabase(ctx context.Context, name string) error {
	if _, err := s.databaseURL(name); err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, s.DatabaseURL)
	if err != nil {
		return fmt.Errorf("drop database %q: connect: %w", name, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("drop database %q: %w", name, err)
	}
	return nil
}

// databaseURL is s.DatabaseURL pointed at database name. It keeps the form
// it was given in: a URL or a keyword/value string.
func (s *Stack) databaseURL(name string) (string, error) {
	if s.DatabaseURL == "" {
		return "", errors.New("stack has no postgres")
	}
	if name == "" || len(name) > 63 {
		return "", fmt.Errorf("database name %q: want 1 to 63 bytes", name)
	}
	if strings.HasPrefix(s.DatabaseURL, "postgres://") || strings.HasPrefix(s.DatabaseURL, "postgresql://") {
		u, err := url.Parse(s.DatabaseURL)
		if err != nil {
			return "", fmt.Errorf("parse database url: %w", err)
		}
		u.Path, u.RawPath = "/"+name, ""
		return u.String(), nil
	}
	// In a keyword/value string the last setting of a keyword wins.
	quoted := strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(name)
	return s.DatabaseURL + " dbname='" + quoted + "'", nil
}

// PostgresPrograms returns the folder of the installed PostgreSQL
// server's programs (initdb, postgres, pg_basebackup, pg_ctl), found as
// the stack finds them, and whom they must run as (nil: this user; the
// postgres system user when this process is root, which they refuse to
// be): for a caller that runs PostgreSQL servers of its own, as the
// cluster of internal/cluster does.
func PostgresPrograms() (dir string, cred *syscall.Credential, err error) {
	bin, err := findPostgres("")
	if err != nil {
		return "", nil, err
	}
	cred, err = postgresCredential()
	return filepath.Dir(bin.postgres), cred, err
}
