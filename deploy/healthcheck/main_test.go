package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestGet(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" || r.URL.RawQuery != "x=1" {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte(`{"status":"ok"}`))
	}))
	defer srv.Close()
	if status, err := get(srv.URL + "/readyz?x=1"); err != nil || !strings.HasPrefix(status, "200") {
		t.Fatalf("ready server: %q, %v", status, err)
	}
	if status, err := get(srv.URL + "/readyz"); err != nil || !strings.HasPrefix(status, "503") {
		t.Fatalf("server answering 503: %q, %v", status, err)
	}
	addr := srv.Listener.Addr().String()
	srv.Close()
	if _, err := get("http://" + addr + "/readyz"); err == nil {
		t.Fatal("closed server: no error")
	}
	if _, err := get("https://" + addr + "/"); err == nil {
		t.Fatal("https accepted")
	}
}
