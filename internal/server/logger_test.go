package server

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// TestLoggerStacks: the process's logger, in either format, puts a stack
// trace on an error and on nothing below it.
func TestLoggerStacks(t *testing.T) {
	for _, format := range []string{"json", "console"} {
		t.Run(format, func(t *testing.T) {
			logger, err := NewLogger(format, "debug")
			require.NoError(t, err)
			core, logs := observer.New(zapcore.DebugLevel)
			logger = logger.WithOptions(zap.WrapCore(func(zapcore.Core) zapcore.Core { return core }))
			logger.Info("info")
			logger.Warn("warn")
			logger.Error("error")
			entries := logs.All()
			require.Len(t, entries, 3)
			require.Empty(t, entries[0].Stack, "info")
			require.Empty(t, entries[1].Stack, "warn")
			require.Contains(t, entries[2].Stack, "TestLoggerStacks", "an error has its stack")
		})
	}
}

func TestNewLoggerRefusesBadSettings(t *testing.T) {
	_, err := NewLogger("yaml", "")
	require.ErrorContains(t, err, `log format "yaml"`)
	_, err = NewLogger("json", "loud")
	require.ErrorContains(t, err, `log level "loud"`)
}
