package pipelinetool_test

import (
	"testing"

	"github.com/agentflow/agentflow/internal/devstack/devtest"
)

// The file tests run against a real store.
func TestMain(m *testing.M) { devtest.Main(m) }
