package loadgen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// CPUProfiles fetches CPU profiles (net/http/pprof) of the services under
// load, started when the load starts so that set-up work (stock loads,
// Redis readings) stays out of them.
type CPUProfiles struct {
	// URLs maps a name to a service's pprof address, e.g.
	// "gateway" -> "http://127.0.0.1:18081".
	URLs map[string]string
	// Dir receives <name>.cpu.pb.gz for each URL.
	Dir string
	// Seconds each profile lasts. Idle time adds no samples, so a window
	// longer than the load costs nothing.
	Seconds int
}

// Start begins every profile and returns a wait that blocks until they are
// written.
func (p CPUProfiles) Start(ctx context.Context) (wait func() error) {
	var wg sync.WaitGroup
	errs := make([]error, 0, len(p.URLs))
	var mu sync.Mutex
	for name, base := range p.URLs {
		wg.Go(func() {
			if err := p.fetch(ctx, name, base); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	return func() error {
		wg.Wait()
		return errors.Join(errs...)
	}
}

func (p CPUProfiles) fetch(ctx context.Context, name, base string) error {
	secs := max(p.Seconds, 1)
	ctx, cancel := context.WithTimeout(ctx, time.Duration(secs+30)*time.Second)
	defer cancel()
	url := base + "/debug/pprof/profile?seconds=" + strconv.Itoa(secs)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("profile %s: %w", name, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("profile %s: %w", name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("profile %s: %s answered %d", name, url, resp.StatusCode)
	}
	f, err := os.Create(filepath.Join(p.Dir, name+".cpu.pb.gz"))
	if err != nil {
		return fmt.Errorf("profile %s: %w", name, err)
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		_ = f.Close()
		return fmt.Errorf("profile %s: %w", name, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("profile %s: %w", name, err)
	}
	return nil
}
