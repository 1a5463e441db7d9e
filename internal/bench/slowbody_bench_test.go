package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentflow/agentflow/internal/devstack/devtest"
	"github.com/agentflow/agentflow/internal/topology"
)

// Issue 43's attack, and its measure: connections that declare a body of
// slowBodyLength bytes, send slowBodySent of them and stall.
const (
	slowBodyConns  = 150
	slowBodyLength = 4_000_001
	slowBodySent   = 4_000_000
	// slowBodyTimeout is the gateway's AGENTFLOW_HTTP_BODY_TIMEOUT here.
	slowBodyTimeout = 10 * time.Second
	// slowBodyHold bounds how long a connection is watched: one the
	// gateway has not closed by then counts as held.
	slowBodyHold = 150 * time.Second
	slowBodyPath = "/v1/turns"
)

// BenchmarkSlowBodies runs issue 43's attack on a gateway process of its
// own (the worker program with the gateway role only, on the test's
// Postgres and Temporal): 150 connections without a credential, each
// declaring a body of 4,000,001 bytes, sending 4,000,000 and stalling;
// then the same with a token. It reports the process's RSS before and
// its growth at the peak (sampled every 20 ms), how each connection was
// answered, and the longest any stayed open, which the gateway's body
// timeout (10 s here) bounds.
//
//	go test -run '^$' -bench BenchmarkSlowBodies -benchtime 1x -v ./internal/bench/
func BenchmarkSlowBodies(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	gw := startGatewayProcess(ctx, b)
	for range b.N {
		for _, phase := range []struct{ name, token string }{{"anonymous", ""}, {"token", gw.token}} {
			r := slowBodies(ctx, b, gw, phase.token)
			b.Logf("%s: RSS %.1f MiB before, peak growth %.1f MiB; answers %v; %d of %d closed by the gateway, the last %.2f s after it connected; %d still open after %s; %.0f MB sent",
				phase.name, mib(r.before), mib(r.peak-r.before), r.statuses, r.closed, slowBodyConns, r.longest.Seconds(), slowBodyConns-r.closed, slowBodyHold,
				float64(r.sent)/1e6)
			b.ReportMetric(mib(r.peak-r.before), phase.name+"-rss-growth-MiB")
			b.ReportMetric(r.longest.Seconds(), phase.name+"-longest-open-s")
			b.ReportMetric(float64(slowBodyConns-r.closed), phase.name+"-held")
		}
	}
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

// gatewayProcess is a running gateway of the worker program.
type gatewayProcess struct {
	pid   int
	api   string // the HTTP API's host:port
	token string
}

// startGatewayProcess builds the worker program and runs it with the
// gateway role only, until the benchmark ends.
func startGatewayProcess(ctx context.Context, b *testing.B) gatewayProcess {
	b.Helper()
	dir := b.TempDir()
	bin, err := topology.Build(ctx, dir)
	if err != nil {
		b.Fatal(err)
	}
	temporal, namespace := devtest.Temporal(b)
	ports := freePorts(b, 3)
	gw := gatewayProcess{api: ports[1], token: "bench-" + strconv.Itoa(os.Getpid())}
	cmd := exec.CommandContext(ctx, bin)
	cmd.Env = append(os.Environ(), "DATABASE_URL="+devtest.Database(b), "TEMPORAL_ADDRESS="+temporal, "TEMPORAL_NAMESPACE="+namespace,
		"AGENTFLOW_ROLES=gateway", "AGENTFLOW_TOKENS="+gw.token+"=demo", "AGENTFLOW_GRPC_ADDR="+ports[0],
		"AGENTFLOW_HTTP_API_ADDR="+ports[1], "AGENTFLOW_HTTP_ADDR="+ports[2], "AGENTFLOW_LOG_LEVEL=warn",
		"AGENTFLOW_HTTP_BODY_TIMEOUT="+slowBodyTimeout.String())
	log, err := os.Create(filepath.Join(dir, "gateway.log"))
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 30 * time.Second
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		_ = log.Close()
	})
	gw.pid = cmd.Process.Pid
	deadline := time.Now().Add(2 * time.Minute)
	for {
		resp, err := http.Get("http://" + ports[2] + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return gw
			}
		}
		if time.Now().After(deadline) {
			data, _ := os.ReadFile(log.Name())
			b.Fatalf("the gateway did not become healthy: %v\n%s", err, data)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// freePorts are n free loopback addresses.
func freePorts(b *testing.B, n int) []string {
	b.Helper()
	var out []string
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		out = append(out, ln.Addr().String())
		defer ln.Close()
	}
	return out
}

// slowBodyRun is what one round of the attack did.
type slowBodyRun struct {
	before, peak int64 // the gateway's RSS
	statuses     map[string]int
	closed       int
	longest      time.Duration // the longest a connection the gateway closed stayed open
	sent         int64
}

// slowBodies runs the attack once (with token, when not empty) and waits
// for every connection to be closed, or slowBodyHold.
func slowBodies(ctx context.Context, b *testing.B, gw gatewayProcess, token string) slowBodyRun {
	b.Helper()
	run := slowBodyRun{statuses: map[string]int{}}
	before, err := rssOf(gw.pid)
	if err != nil {
		b.Fatal(err)
	}
	run.before = before
	var mu sync.Mutex
	done := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				r, _ := rssOf(gw.pid)
				mu.Lock()
				run.peak = max(run.peak, r)
				mu.Unlock()
			}
		}
	}()
	var wg sync.WaitGroup
	for range slowBodyConns {
		wg.Go(func() {
			o := stallOnce(ctx, gw.api, token)
			mu.Lock()
			defer mu.Unlock()
			run.statuses[o.answer]++
			run.sent += o.sent
			if o.closed {
				run.closed++
				run.longest = max(run.longest, o.open)
			}
		})
	}
	wg.Wait()
	close(done)
	<-sampled
	run.peak = max(run.peak, run.before)
	return run
}

// stalled is one connection's outcome.
type stalled struct {
	answer string // the status line's code, or what ended the connection without one
	sent   int64
	closed bool          // by the gateway, before slowBodyHold
	open   time.Duration // from connecting to its close
}

// stallOnce opens a connection, sends a request's headers and
// slowBodySent bytes of its body, then reads until the gateway closes
// the connection.
func stallOnce(ctx context.Context, addr, token string) stalled {
	var out stalled
	start := time.Now()
	c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		out.answer = "dial: " + err.Error()
		return out
	}
	defer c.Close()
	_ = c.SetDeadline(start.Add(slowBodyHold))
	head := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n", slowBodyPath, addr, slowBodyLength)
	if token != "" {
		head += "Authorization: Bearer " + token + "\r\n"
	}
	if _, err := c.Write([]byte(head + "\r\n")); err != nil {
		out.answer = "write: " + err.Error()
		return out
	}
	chunk := make([]byte, 64<<10)
	for out.sent < slowBodySent {
		n, err := c.Write(chunk[:min(int64(len(chunk)), slowBodySent-out.sent)])
		out.sent += int64(n)
		if err != nil {
			break // the gateway closed it under the write
		}
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	var ne net.Error
	switch {
	case err == nil:
		out.answer = strconv.Itoa(resp.StatusCode)
	case errors.As(err, &ne) && ne.Timeout():
		out.answer = "no answer"
	default:
		out.answer = "closed without an answer"
	}
	var buf [4096]byte
	for {
		_, err := br.Read(buf[:])
		if err == nil {
			continue
		}
		out.closed = !(errors.As(err, &ne) && ne.Timeout())
		out.open = time.Since(start)
		return out
	}
}

// rssOf is a process's resident set size, from /proc.
func rssOf(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}
