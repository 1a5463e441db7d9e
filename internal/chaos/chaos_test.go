package chaos

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
)

var (
	full = flag.Bool("chaos.full", false, "run every trial its full number of times (go tool task chaos)")
	only = flag.String("chaos.only", "", "run only the trials whose names match this regexp")
	dev  = flag.Bool("chaos.dev", false, "run the topology on the Temporal CLI's dev server (the dev stack's) instead of the real server")
	seed = flag.Uint64("chaos.seed", 0, "seed of the trials' random choices (default: from the clock; a run prints it)")
)

// TestChaos runs the fault suite on the production topology: a run or two
// of each trial, or all of them with -chaos.full. It prints the table.
func TestChaos(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 80*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "chaos-*")
	require.NoError(t, err)
	t.Cleanup(func() {
		if !t.Failed() {
			_ = os.RemoveAll(dir)
		}
	})
	// The suite's own log goes beside the processes' logs.
	logger, err := zap.Config{
		Level: zap.NewAtomicLevelAt(zap.InfoLevel), Encoding: "console", EncoderConfig: zap.NewDevelopmentEncoderConfig(),
		OutputPaths: []string{filepath.Join(dir, "chaos.log")}, ErrorOutputPaths: []string{"stderr"},
	}.Build()
	require.NoError(t, err)
	defer func() { _ = logger.Sync() }()
	s := *seed
	if s == 0 {
		s = uint64(time.Now().UnixNano())
	}
	// On stdout, so that a failed run can be made again (-chaos.seed).
	fmt.Printf("chaos seed %d\n", s)
	opts := Options{Dir: dir, Short: !*full, Logger: logger, Seed: s, DevServer: *dev}
	if *only != "" {
		opts.Only = regexp.MustCompile(*only)
	}
	results, err := Run(ctx, opts)
	var table bytes.Buffer
	WriteTable(&table, results)
	// On stdout, so that `go tool task chaos` shows it without -v.
	fmt.Printf("chaos results (state and logs in %s):\n%s", dir, table.String())
	require.NoError(t, err)
	require.NotEmpty(t, results)
	require.False(t, Failed(results), "failed runs:\n%s", table.String())
}
