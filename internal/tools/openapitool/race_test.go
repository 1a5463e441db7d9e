//go:build race

package openapitool_test

// openapiRaceShadow is how many bytes of ThreadSanitizer shadow a
// race-enabled process touches per byte of heap: a memory bound holds
// that much more under -race.
const openapiRaceShadow = 2
