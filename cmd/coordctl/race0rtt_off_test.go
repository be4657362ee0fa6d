//go:build !race

package main

import "testing"

// skip0RTTUnderRace does nothing without the race detector (see its race
// build).
func skip0RTTUnderRace(*testing.T) {}
