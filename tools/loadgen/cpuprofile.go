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
// Redis readings) stays out of them, and a goroutine dump halfway through:
// where the requests wait when the CPU profile shows a service idle.
type CPUProfiles struct {
	// URLs maps a name to a service's pprof address, e.g.
	// "gateway" -> "http://127.0.0.1:18081".
	URLs map[string]string
	// Dir receives <name>.cpu.pb.gz and <name>.goroutines.txt for each
	// URL.
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
			err := p.fetch(ctx, name+".cpu.pb.gz", base+"/debug/pprof/profile?seconds="+strconv.Itoa(max(p.Seconds, 1)))
			if err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
		wg.Go(func() {
			select {
			case <-time.After(time.Duration(max(p.Seconds, 1)) * time.Second / 2):
			case <-ctx.Done():
				return
			}
			if err := p.fetch(ctx, name+".goroutines.txt", base+"/debug/pprof/goroutine?debug=1"); err != nil {
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

// fetch saves what url answers as file in Dir.
func (p CPUProfiles) fetch(ctx context.Context, file, url string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(max(p.Seconds, 1)+30)*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("fetch %s: %w", file, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("fetch %s: %w", file, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("fetch %s: %s answered %d", file, url, resp.StatusCode)
	}
	f, err := os.Create(filepath.Join(p.Dir, file))
	if err != nil {
		return fmt.Errorf("fetch %s: %w", file, err)
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		_ = f.Close()
		return fmt.Errorf("fetch %s: %w", file, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("fetch %s: %w", file, err)
	}
	return nil
}
