package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"surge/pkg/admin"
	"surge/pkg/order"
)

// scriptedDLQ answers with fixed results and remembers the requests, to
// check the HTTP shape of answers the real queue only gives under faults.
type scriptedDLQ struct {
	replays  []admin.ReplayRequest
	discards []string
	report   admin.LetterReport
	err      error
}

func (s *scriptedDLQ) List(context.Context) ([]admin.Letter, error) { return nil, s.err }
func (s *scriptedDLQ) Show(context.Context, string) (admin.LetterDetail, error) {
	return admin.LetterDetail{}, s.err
}
func (s *scriptedDLQ) Replay(_ context.Context, req admin.ReplayRequest) (admin.LetterReport, error) {
	s.replays = append(s.replays, req)
	return s.report, s.err
}
func (s *scriptedDLQ) Discard(_ context.Context, ids []string, actor string) (admin.LetterReport, error) {
	s.discards = append(s.discards, actor+":"+strings.Join(ids, ","))
	return s.report, s.err
}

func dlqServer(t *testing.T, dl *scriptedDLQ) *httptest.Server {
	s := &Server{AdminToken: "tok", Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	s.Handler()
	MountDeadLetters(s, dl)
	srv := httptest.NewServer(s.AdminHandler())
	t.Cleanup(srv.Close)
	return srv
}

func call(t *testing.T, srv *httptest.Server, method, path, body, operator string) (*http.Response, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer tok")
	if operator != "" {
		req.Header.Set(OperatorHeader, operator)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("%s %s: answer is not JSON: %v", method, path, err)
	}
	return resp, out
}

func TestReplayRequestFromHTTP(t *testing.T) {
	dl := &scriptedDLQ{report: admin.LetterReport{Action: "replay", Counts: map[string]int{}}}
	srv := dlqServer(t, dl)
	before := time.Now()
	call(t, srv, "POST", "/v1/admin/dlq/replay", `{"reason":"unknown_sku","since":"1h","dry_run":true}`, "")
	call(t, srv, "POST", "/v1/admin/dlq/replay", `{"ids":["A","B"]}`, "frank")
	call(t, srv, "POST", "/v1/admin/dlq/discard", `{"ids":["C"]}`, "")
	if len(dl.replays) != 2 {
		t.Fatalf("replays %+v", dl.replays)
	}
	first := dl.replays[0]
	if first.Reason != "unknown_sku" || !first.DryRun || first.Actor != DefaultOperator ||
		first.Since.Before(before.Add(-time.Hour-time.Second)) || first.Since.After(time.Now().Add(-time.Hour)) {
		t.Errorf("first replay request %+v, want unknown_sku since one hour ago, dry run, by admin-api", first)
	}
	if diff := cmp.Diff([]string{"A", "B"}, dl.replays[1].IDs); diff != "" || dl.replays[1].Actor != "frank" {
		t.Errorf("second replay request %+v", dl.replays[1])
	}
	if diff := cmp.Diff([]string{"admin-api:C"}, dl.discards); diff != "" {
		t.Errorf("discards (-want +got):\n%s", diff)
	}
}

// TestReplayFailingMidwayKeepsTheReport: the operator sees both the error
// and what was done before it.
func TestReplayFailingMidwayKeepsTheReport(t *testing.T) {
	dl := &scriptedDLQ{
		report: admin.LetterReport{Action: "replay", Actor: "admin-api", Counts: map[string]int{"replayed": 1, "failed": 1},
			Items: []admin.LetterItem{{ID: "A", Outcome: "replayed"}, {ID: "B", Outcome: "failed"}}},
		err: fmt.Errorf("replay dead letters: %w: connection to rabbitmq lost", order.ErrUnavailable),
	}
	srv := dlqServer(t, dl)
	resp, out := call(t, srv, "POST", "/v1/admin/dlq/replay", `{"all":true}`, "")
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("status %d, Retry-After %q; want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	errBody, _ := out["error"].(map[string]any)
	rep, _ := out["report"].(map[string]any)
	if errBody["code"] != "unavailable" || !strings.Contains(fmt.Sprint(errBody["message"]), "rabbitmq") {
		t.Errorf("error %v, want unavailable naming rabbitmq", errBody)
	}
	if items, _ := rep["results"].([]any); len(items) != 2 {
		t.Errorf("report %v, want both results", rep)
	}

	dl.report = admin.LetterReport{}
	resp, out = call(t, srv, "GET", "/v1/admin/dlq", "", "")
	if resp.StatusCode != http.StatusServiceUnavailable || out["report"] != nil {
		t.Errorf("list with the broker down: %d %v, want a plain 503", resp.StatusCode, out)
	}
}
