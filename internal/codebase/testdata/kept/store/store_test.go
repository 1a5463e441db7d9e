package store

import "testing"

func TestSave(t *testing.T) {}
