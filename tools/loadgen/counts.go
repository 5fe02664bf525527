package loadgen

import (
	"strconv"
	"sync"
	"sync/atomic"
)

// maxErrorSamples bounds how many distinct transport errors a run keeps.
const maxErrorSamples = 5

// counts tallies outcomes by HTTP status; status 0 is a transport error
// (no response).
type counts struct {
	status [600]atomic.Int64
	done   atomic.Int64

	mu     sync.Mutex
	errors []string
}

func (c *counts) add(status int, err error) {
	if status < 0 || status >= len(c.status) {
		status = 0
	}
	c.status[status].Add(1)
	c.done.Add(1)
	if err == nil {
		return
	}
	msg := err.Error()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.errors) < maxErrorSamples && !contains(c.errors, msg) {
		c.errors = append(c.errors, msg)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Counts are a run's outcomes so far.
type Counts struct {
	// Done is the number of completed requests (errors included).
	Done int64 `json:"done"`
	// Status maps an HTTP status ("202") to its count; "error" counts
	// requests that got no response.
	Status map[string]int64 `json:"status"`
}

// Of returns the count of one HTTP status.
func (c Counts) Of(status int) int64 { return c.Status[strconv.Itoa(status)] }

// Errors returns the number of requests that got no response.
func (c Counts) Errors() int64 { return c.Status["error"] }

func (c *counts) snapshot() Counts {
	out := Counts{Done: c.done.Load(), Status: map[string]int64{}}
	for code := range c.status {
		n := c.status[code].Load()
		if n == 0 {
			continue
		}
		key := strconv.Itoa(code)
		if code == 0 {
			key = "error"
		}
		out.Status[key] = n
	}
	return out
}

func (c *counts) errorSamples() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.errors...)
}
