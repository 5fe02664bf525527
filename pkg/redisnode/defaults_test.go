package redisnode

import (
	"testing"
	"time"
)

func TestOptionsDefaults(t *testing.T) {
	tests := []struct {
		name        string
		in          time.Duration
		wantTimeout time.Duration
	}{
		{"zero", 0, 2 * time.Second},
		{"negative", -time.Second, 2 * time.Second},
		{"set", time.Second, time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := Options{Username: "u", Password: "p", Timeout: tt.in}
			o.setDefaults()
			if o != (Options{Username: "u", Password: "p", Timeout: tt.wantTimeout}) {
				t.Fatalf("got %+v, want timeout %v and the credentials kept", o, tt.wantTimeout)
			}
		})
	}
}
