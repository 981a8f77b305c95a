//go:build race

package state_test

// raceDetector is set when the tests run with -race, which makes bulk tests about ten
// times slower: they then run a tenth of the work.
const raceDetector = true
