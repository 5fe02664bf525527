package app

import "testing"

func TestGCDefaults(t *testing.T) {
	for _, tc := range []struct {
		name           string
		env            map[string]string
		percent, limit int64
	}{
		{"nothing set", nil, defaultGCPercent, defaultMemoryLimit},
		{"GOGC set", map[string]string{"GOGC": "100"}, -1, defaultMemoryLimit},
		{"GOMEMLIMIT set", map[string]string{"GOMEMLIMIT": "1GiB"}, defaultGCPercent, -1},
		{"both set", map[string]string{"GOGC": "off", "GOMEMLIMIT": "1GiB"}, -1, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			percent, limit := gcDefaults(func(k string) string { return tc.env[k] })
			if int64(percent) != tc.percent || limit != tc.limit {
				t.Fatalf("gcDefaults = %d, %d; want %d, %d", percent, limit, tc.percent, tc.limit)
			}
		})
	}
}
