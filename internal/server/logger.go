package server

import (
	"fmt"
	"log"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// NewLogger builds the process's logger: format "json" (default) or
// "console", level debug|info (default)|warn|error.
func NewLogger(format, level string) (*zap.Logger, error) {
	cfg := zap.NewProductionConfig()
	if format == "console" {
		cfg = zap.NewDevelopmentConfig()
		cfg.EncoderConfig.EncodeLevel = zapcore.CapitalColorLevelEncoder
	} else if format != "" && format != "json" {
		return nil, fmt.Errorf("log format %q: want json or console", format)
	}
	if level != "" {
		l, err := zapcore.ParseLevel(level)
		if err != nil {
			return nil, fmt.Errorf("log level %q: %w", level, err)
		}
		cfg.Level = zap.NewAtomicLevelAt(l)
	}
	// Stack traces on errors only, in both formats: zap's development
	// config (console) adds them at warn, so every warning — a tool call
	// that failed and is retried, a turn the user stopped — came with
	// two dozen lines of the SDK's frames.
	cfg.DisableStacktrace = true
	logger, err := cfg.Build(zap.AddStacktrace(zapcore.ErrorLevel))
	if err != nil {
		return nil, fmt.Errorf("build logger: %w", err)
	}
	return logger, nil
}

// httpErrorLog sends net/http's own complaints about the HTTP API's
// connections (one it could not read, a handler's panic) to the
// process's log, as warnings.
func httpErrorLog(logger *zap.Logger) *log.Logger {
	l, err := zap.NewStdLogAt(logger.With(zap.String("component", "http_api")), zap.WarnLevel)
	if err != nil {
		return nil // only for a level zap does not know; net/http then logs to stderr
	}
	return l
}
