package rollout

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/store"
)

func TestCompare(t *testing.T) {
	current := store.BuildSignals{Turns: 100, Failed: 2, GuardTrips: 1, Tokens: 100 * 400}
	tests := []struct {
		name  string
		build store.BuildSignals
		want  []string
	}{
		{"as good", store.BuildSignals{Turns: 20, Failed: 0, Tokens: 20 * 400}, nil},
		{"within the thresholds", store.BuildSignals{Turns: 20, Failed: 1, GuardTrips: 1, Tokens: 20 * 500}, nil},
		{"fails more", store.BuildSignals{Turns: 20, Failed: 3, Tokens: 20 * 400}, []string{"error_rate"}},
		{"trips more", store.BuildSignals{Turns: 20, GuardTrips: 2, Tokens: 20 * 400}, []string{"guard_rate"}},
		{"costs more", store.BuildSignals{Turns: 20, Tokens: 20 * 501}, []string{"tokens_per_turn"}},
		{"all three", store.BuildSignals{Turns: 10, Failed: 5, GuardTrips: 5, Tokens: 10 * 900}, []string{"error_rate", "guard_rate", "tokens_per_turn"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, r := range Compare(tt.build, current, DefaultThresholds) {
				got = append(got, r.Signal)
				require.NotEmpty(t, r.Described)
			}
			require.Equal(t, tt.want, got)
		})
	}
	// A current build with no turns (a fresh deployment) has no tokens
	// to compare with: only the rates count.
	require.Empty(t, Compare(store.BuildSignals{Turns: 5, Tokens: 5000}, store.BuildSignals{}, DefaultThresholds))
	require.Len(t, Compare(store.BuildSignals{Turns: 5, Failed: 1}, store.BuildSignals{}, DefaultThresholds), 1)
}

func TestOptionsDefaults(t *testing.T) {
	o := Options{Deployment: "d", Build: "b", Steps: []int{25}}
	require.NoError(t, o.defaults())
	require.Equal(t, []int{25, 100}, o.Steps, "the last step makes the build current")
	for _, steps := range [][]int{{50, 10}, {0}, {10, 101}} {
		o := Options{Deployment: "d", Build: "b", Steps: steps}
		require.Error(t, o.defaults(), "%v", steps)
	}
	require.Error(t, (&Options{Build: "b"}).defaults())
}
