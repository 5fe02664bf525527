//go:build race

package gateway

// raceDetector: the race detector's instrumentation allocates by itself,
// so allocation counts are measured only without it (make test runs them
// once more without -race).
const raceDetector = true
