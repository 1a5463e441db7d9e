package ownworker

import (
	"context"
	"strings"
)

// WeatherIn is what the model sends. The JSON Schema the model is shown,
// and that its arguments are checked against, is made from it.
type WeatherIn struct {
	City string `json:"city" jsonschema:"the city, e.g. Lisbon"`
}

// Forecast is what the model reads, as JSON.
type Forecast struct {
	City  string  `json:"city"`
	TempC float64 `json:"temp_c"`
	Sky   string  `json:"sky"`
}

// forecasts stand in for a weather service.
var forecasts = map[string]Forecast{
	"lisbon": {City: "Lisbon", TempC: 22, Sky: "sunny"},
	"oslo":   {City: "Oslo", TempC: -3, Sky: "snow"},
}

// Weather is the tool: a Go function of a typed input.
func Weather(_ context.Context, in WeatherIn) (Forecast, error) {
	f, ok := forecasts[strings.ToLower(strings.TrimSpace(in.City))]
	if !ok {
		return Forecast{City: in.City, Sky: "unknown"}, nil
	}
	return f, nil
}
