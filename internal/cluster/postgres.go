package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"
)

// pgPort is every PostgreSQL server's port, on its host's address.
const pgPort = "5432"

// pgServer is one PostgreSQL server on a host.
type pgServer struct {
	host *Host
	data string
	proc *Proc
}

// addr is where the server listens.
func (s *pgServer) addr() string { return net.JoinHostPort(s.host.Addr.String(), pgPort) }

// url is the server's database name, connected to directly (not through
// a link): for the cluster's own work, never for a client's.
func (s *pgServer) url(name string) string {
	return "postgres://postgres@" + s.addr() + "/" + name + "?sslmode=disable&connect_timeout=2"
}

// pgConf is added to every server's configuration. Replication is
// synchronous: a commit returns once the standby has it, so a promoted
// standby has every write a client was told of, as a high-availability
// PostgreSQL (Patroni's synchronous mode, a managed service's
// multi-zone option) promises.
const pgConf = `
port = ` + pgPort + `
unix_socket_directories = ''
max_connections = 300
wal_level = replica
max_wal_senders = 10
wal_keep_size = '512MB'
hot_standby = on
synchronous_commit = on
synchronous_standby_names = '*'
wal_sender_timeout = '5s'
wal_receiver_timeout = '5s'
`

// startPrimary makes a new primary's data folder and starts it on host.
func (c *Cluster) startPrimary(ctx context.Context, host *Host) (*pgServer, error) {
	s := &pgServer{host: host, data: filepath.Join(c.pgDir, "pg-"+host.Name)}
	if err := c.asPostgres(ctx, nil, filepath.Join(c.pgBin, "initdb"), "-D", s.data, "-A", "trust", "-U", "postgres",
		"--encoding=UTF8", "--no-locale", "--no-sync"); err != nil {
		return nil, err
	}
	hba := fmt.Sprintf("host all all %s trust\nhost replication all %s trust\n", c.net.prefix, c.net.prefix)
	if err := appendFile(filepath.Join(s.data, "pg_hba.conf"), hba); err != nil {
		return nil, err
	}
	conf := pgConf + fmt.Sprintf("listen_addresses = '%s'\n", host.Addr)
	if err := appendFile(filepath.Join(s.data, "postgresql.conf"), conf); err != nil {
		return nil, err
	}
	return s, c.runPostgres(ctx, s)
}

// startStandby copies the primary to host with pg_basebackup, made a
// streaming hot standby of it (-R), and starts it.
func (c *Cluster) startStandby(ctx context.Context, host *Host, primary *pgServer) (*pgServer, error) {
	s := &pgServer{host: host, data: filepath.Join(c.pgDir, "pg-"+host.Name)}
	if err := os.MkdirAll(s.data, 0o700); err != nil {
		return nil, fmt.Errorf("cluster: standby folder: %w", err)
	}
	if err := os.Chown(s.data, int(c.pgCred.Uid), int(c.pgCred.Gid)); c.pgCred != nil && err != nil {
		return nil, fmt.Errorf("cluster: standby folder: %w", err)
	}
	if err := c.asPostgres(ctx, host, filepath.Join(c.pgBin, "pg_basebackup"), "-h", primary.host.Addr.String(), "-p", pgPort,
		"-U", "postgres", "-D", s.data, "-R", "-X", "stream", "-c", "fast"); err != nil {
		return nil, err
	}
	// The copy has the primary's address; the later setting wins. A
	// standby whose primary is gone must not wait out TCP's timeouts on
	// it: a promotion waits for its WAL receiver to give up.
	conf := fmt.Sprintf("listen_addresses = '%s'\nprimary_conninfo = 'host=%s port=%s user=postgres application_name=%s "+
		"connect_timeout=2 keepalives_idle=5 keepalives_interval=2 keepalives_count=2'\n", host.Addr, primary.host.Addr, pgPort, host.Name)
	if err := appendFile(filepath.Join(s.data, "postgresql.auto.conf"), conf); err != nil {
		return nil, err
	}
	return s, c.runPostgres(ctx, s)
}

// runPostgres starts the server and waits until it takes connections.
func (c *Cluster) runPostgres(ctx context.Context, s *pgServer) error {
	s.proc = s.host.NewProc("postgres-"+s.host.Name, c.dir, []string{filepath.Join(c.pgBin, "postgres"), "-D", s.data}, c.pgCred)
	s.proc.dir = c.pgDir // a folder the postgres user reaches
	if err := s.proc.Start(); err != nil {
		return err
	}
	return c.wait(ctx, "postgres on "+s.host.Name, s.proc, func(ctx context.Context) error {
		conn, err := pgx.Connect(ctx, s.url("postgres"))
		if err != nil {
			return err
		}
		return conn.Close(ctx)
	})
}

// asPostgres runs a PostgreSQL program to its end as the postgres user,
// on host (nil: here, without the network).
func (c *Cluster) asPostgres(ctx context.Context, host *Host, argv ...string) error {
	var cmd *exec.Cmd
	if host != nil {
		full := host.Argv(argv, c.pgCred)
		cmd = exec.CommandContext(ctx, full[0], full[1:]...)
	} else {
		cmd = exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.pgCred}
	}
	cmd.Dir = c.pgDir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("cluster: %s: %w\n%s", filepath.Base(argv[0]), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// promote makes the standby a primary that commits alone: with no
// standby of its own, waiting for one would stop every commit.
func (s *pgServer) promote(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, s.url("postgres"))
	if err != nil {
		return fmt.Errorf("cluster: promote: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var ok bool
	if err := conn.QueryRow(ctx, "SELECT pg_promote(true, 60)").Scan(&ok); err != nil || !ok {
		return fmt.Errorf("cluster: promote %s: %v (promoted: %t)", s.host.Name, err, ok)
	}
	for _, q := range []string{"ALTER SYSTEM SET synchronous_standby_names = ''", "SELECT pg_reload_conf()"} {
		if _, err := conn.Exec(ctx, q); err != nil {
			return fmt.Errorf("cluster: promote %s: %s: %w", s.host.Name, q, err)
		}
	}
	return nil
}

// createDatabases makes each database on the primary unless it exists.
func (s *pgServer) createDatabases(ctx context.Context, names ...string) error {
	conn, err := pgx.Connect(ctx, s.url("postgres"))
	if err != nil {
		return fmt.Errorf("cluster: connect to postgres: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	for _, name := range names {
		var exists bool
		if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
			return fmt.Errorf("cluster: database %s: %w", name, err)
		}
		if !exists {
			if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
				return fmt.Errorf("cluster: create database %s: %w", name, err)
			}
		}
	}
	return nil
}

// wait polls ready until it answers nil, failing early when proc exits.
func (c *Cluster) wait(ctx context.Context, what string, proc *Proc, ready func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		attempt, stop := context.WithTimeout(ctx, 3*time.Second)
		err := ready(attempt)
		stop()
		if err == nil {
			return nil
		}
		if proc != nil {
			if exit := proc.Exited(); exit != nil {
				return fmt.Errorf("cluster: %s: %w", what, exit)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster: %s not ready: %w", what, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func appendFile(path, text string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	_, err = f.WriteString(text)
	return errorsJoinClose(err, f.Close(), path)
}

func errorsJoinClose(err, cerr error, path string) error {
	if err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("cluster: write %s: %w", path, err)
	}
	return nil
}

// Failover loses the primary and makes the standby primary, as an
// operator (or Patroni) does: the old primary is fenced — killed, so that
// nothing can write to it again — the standby promoted, every link to
// PostgreSQL repointed at it (closing the connections to the old one),
// and the old primary's host cut off. It returns once the new primary
// takes writes. The cut comes last: a link's new connection to a host
// that drops everything would wait out TCP's timeout, where a dead
// server's port refuses it at once.
func (c *Cluster) Failover(ctx context.Context) error {
	if c.standby == nil {
		return errors.New("cluster: no standby to fail over to")
	}
	old := c.primary
	begin := time.Now()
	old.proc.Kill()
	if err := c.standby.promote(ctx); err != nil {
		return err
	}
	c.primary, c.standby = c.standby, nil
	for _, k := range c.Links.Matching(">pg") {
		if err := k.Repoint(c.primary.addr()); err != nil {
			return err
		}
	}
	if err := old.host.Cut(ctx); err != nil {
		return err
	}
	err := c.wait(ctx, "promoted postgres", c.primary.proc, func(ctx context.Context) error {
		conn, err := pgx.Connect(ctx, c.primary.url(appDB))
		if err != nil {
			return err
		}
		defer conn.Close(context.WithoutCancel(ctx))
		_, err = conn.Exec(ctx, "CREATE TEMP TABLE failover_probe (x int)")
		return err
	})
	c.log.Info("postgres failed over", zap.Duration("took", time.Since(begin)))
	return err
}
