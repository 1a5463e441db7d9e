package words

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestListEntries(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{" , ,", nil},
		{"a", []string{"a"}},
		{" a = b ,c,, d ", []string{"a = b", "c", "d"}},
	} {
		require.Equal(t, tc.want, ListEntries(tc.in), "%q", tc.in)
	}
}

func TestClip(t *testing.T) {
	require.Equal(t, "abc", Clip("abc", 3))
	require.Equal(t, "ab…", Clip("abcd", 2))
	require.Equal(t, "…", Clip("é", 1), "never inside a rune")
	require.Equal(t, "none", Listed(nil, 3))
	require.Equal(t, "a, b and 1 more", Listed([]string{"a", "b", "c"}, 2))
}
