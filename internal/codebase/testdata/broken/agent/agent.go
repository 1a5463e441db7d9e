package agent

import "example.com/m/store"

var _ = store.X
