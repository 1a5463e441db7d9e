package tools

import (
	"testing"

	"github.com/agentflow/agentflow/internal/devstack/devtest"
)

// The patch_workflow tests run against a real database.
func TestMain(m *testing.M) { devtest.Main(m) }
