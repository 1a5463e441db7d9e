//go:build !race

package tools

// openapiRaceShadow: no shadow memory without the race detector (see
// openapi_race_test.go).
const openapiRaceShadow = 0
