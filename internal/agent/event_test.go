package agent

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestReplayText(t *testing.T) {
	tok := func(i int64, s string) Event { return Event{Index: i, Kind: EventToken, Text: s} }
	tests := []struct {
		name   string
		events []Event
		want   string
	}{
		{"plain", []Event{{Index: 1, Kind: EventStatus, Status: StreamRunning}, tok(2, "Hello, "), tok(3, "world")}, "Hello, world"},
		{"retry voids the failed attempt", []Event{
			tok(1, "Hel"), tok(2, "lo wo"),
			{Index: 3, Kind: EventStatus, Status: StreamRetrying, VoidFrom: 1},
			tok(4, "Hello, world"),
		}, "Hello, world"},
		{"retry keeps earlier steps", []Event{
			tok(1, "Step one. "), {Index: 2, Kind: EventToolStart}, tok(3, "Ste"),
			{Index: 4, Kind: EventStatus, Status: StreamRetrying, VoidFrom: 3},
			tok(5, "Step two."),
		}, "Step one. Step two."},
		{"no events", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, ReplayText(tt.events))
		})
	}
}

func TestValidateAfter(t *testing.T) {
	require.NoError(t, ValidateAfter(0, 1))
	require.NoError(t, ValidateAfter(0, 10))
	require.NoError(t, ValidateAfter(9, 10))
	require.ErrorContains(t, ValidateAfter(10, 10), "beyond the end of the stream (last index 9)")
	require.ErrorContains(t, ValidateAfter(-1, 10), "must not be negative")
	require.True(t, IsCode(ValidateAfter(1, 1), CodeInvalid))
}

func TestStreamTenant(t *testing.T) {
	tenant, err := StreamTenant("turn/acme/job/with/slashes")
	require.NoError(t, err)
	require.Equal(t, "acme", tenant)
	for _, bad := range []string{"", "turn/", "turn/acme", "turn//job", "conv/acme/s1"} {
		_, err := StreamTenant(bad)
		require.True(t, IsCode(err, CodeInvalid), bad)
	}
}
