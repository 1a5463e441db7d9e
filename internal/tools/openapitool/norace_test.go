//go:build !race

package openapitool_test

// openapiRaceShadow: no shadow memory without the race detector (see
// openapi_race_test.go).
const openapiRaceShadow = 0
