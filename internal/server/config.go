package server

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/agentflow/agentflow/internal/llm"
	"github.com/agentflow/agentflow/workflows"
)

// Config of a worker process. ConfigFromEnv reads it from the environment.
type Config struct {
	// TemporalAddress is the frontend's host:port. Env TEMPORAL_ADDRESS; default 127.0.0.1:7233.
	TemporalAddress string
	// Namespace. Env TEMPORAL_NAMESPACE; default "default".
	Namespace string
	// TaskQueue. Env AGENTFLOW_TASK_QUEUE; default "agentflow".
	TaskQueue string
	// DatabaseURL of Postgres. Env DATABASE_URL; required.
	DatabaseURL string
	// HTTPAddr serves /healthz. Env AGENTFLOW_HTTP_ADDR; default 127.0.0.1:9090; "off" disables it.
	HTTPAddr string
	// Model providers. Env OPENAI_API_KEY, OPENAI_BASE_URL, ANTHROPIC_API_KEY, OLLAMA_HOST.
	Model llm.Config
	// Script, when set, serves the scripted OpenAI-compatible model
	// in-process and points the openai provider at it: "demo" for the
	// built-in demo script, "auto" for the demo script only when no provider
	// is configured, else a script file. Env AGENTFLOW_SCRIPT.
	Script string
	// ResultInlineLimit: results larger than this many bytes are stored as
	// blobs. Env AGENTFLOW_RESULT_INLINE_LIMIT; default 10 MiB.
	ResultInlineLimit int
	// StreamInterval is the time between token batches, 100ms to 250ms.
	// Env AGENTFLOW_STREAM_INTERVAL_MS; default 200.
	StreamInterval time.Duration
}

// ConfigFromEnv reads the configuration from the environment, with defaults.
func ConfigFromEnv() (Config, error) {
	c := Config{
		TemporalAddress: envOr("TEMPORAL_ADDRESS", "127.0.0.1:7233"),
		Namespace:       envOr("TEMPORAL_NAMESPACE", "default"),
		TaskQueue:       envOr("AGENTFLOW_TASK_QUEUE", workflows.TaskQueue),
		DatabaseURL:     os.Getenv("DATABASE_URL"),
		HTTPAddr:        envOr("AGENTFLOW_HTTP_ADDR", "127.0.0.1:9090"),
		Model:           llm.ConfigFromEnv(),
		Script:          os.Getenv("AGENTFLOW_SCRIPT"),
	}
	if v := os.Getenv("AGENTFLOW_RESULT_INLINE_LIMIT"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return Config{}, fmt.Errorf("AGENTFLOW_RESULT_INLINE_LIMIT=%q: want a positive number of bytes", v)
		}
		c.ResultInlineLimit = n
	}
	if v := os.Getenv("AGENTFLOW_STREAM_INTERVAL_MS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return Config{}, fmt.Errorf("AGENTFLOW_STREAM_INTERVAL_MS=%q: want milliseconds, 100 to 250", v)
		}
		c.StreamInterval = time.Duration(n) * time.Millisecond
	}
	return c, nil
}

// Validate reports missing settings before anything is started.
func (c Config) Validate() error {
	switch {
	case c.DatabaseURL == "":
		return fmt.Errorf("DATABASE_URL is not set: point it at PostgreSQL, or run `go tool task up` for a local stack")
	case c.TemporalAddress == "":
		return fmt.Errorf("TEMPORAL_ADDRESS is empty")
	case c.TaskQueue == "":
		return fmt.Errorf("AGENTFLOW_TASK_QUEUE is empty")
	case c.StreamInterval != 0 && (c.StreamInterval < 100*time.Millisecond || c.StreamInterval > 250*time.Millisecond):
		return fmt.Errorf("stream interval %s: want 100ms to 250ms (AGENTFLOW_STREAM_INTERVAL_MS)", c.StreamInterval)
	}
	return nil
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
