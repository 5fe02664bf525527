package httpapi

import (
	"context"
	"net/http"
	"time"

	"surge/pkg/admin"
)

// DeadLetterAdmin works the dead-letter queue. *ops.DeadLetters
// implements it.
type DeadLetterAdmin interface {
	List(ctx context.Context) ([]admin.Letter, error)
	Show(ctx context.Context, id string) (admin.LetterDetail, error)
	Replay(ctx context.Context, req admin.ReplayRequest) (admin.LetterReport, error)
	Discard(ctx context.Context, ids []string, actor string) (admin.LetterReport, error)
}

// OperatorHeader names the person acting through the admin API; replays
// and discards are recorded under it, or under DefaultOperator without it.
const (
	OperatorHeader  = "X-Surge-Operator"
	DefaultOperator = "admin-api"
)

// MountDeadLetters mounts the dead-letter routes, behind the admin token,
// on s's admin listener (after s.Handler):
//
//	GET  /v1/admin/dlq          {"count":N,"dead_letters":[...]}, oldest first
//	GET  /v1/admin/dlq/{id}     one letter with headers and body; 404 not_found
//	POST /v1/admin/dlq/replay   {"ids":[...]} | {"reason","since"} | {"all":true}, "dry_run"
//	POST /v1/admin/dlq/discard  {"ids":[...]}
//
// Replay and discard answer 200 with admin.LetterReport. When they fail midway
// the error status carries the report of what was done beside "error".
// Errors keep their full message, which names the engine at fault: the
// admin API speaks to operators, not to customers.
func MountDeadLetters(s *Server, dl DeadLetterAdmin) {
	h := &dlqHandlers{s: s, dl: dl, now: time.Now}
	s.HandleAdmin("GET /v1/admin/dlq", s.Admin(h.list))
	s.HandleAdmin("GET /v1/admin/dlq/{id}", s.Admin(h.show))
	s.HandleAdmin("POST /v1/admin/dlq/replay", s.Admin(h.replay))
	s.HandleAdmin("POST /v1/admin/dlq/discard", s.Admin(h.discard))
}

type dlqHandlers struct {
	s   *Server
	dl  DeadLetterAdmin
	now func() time.Time
}

type letterList struct {
	Count   int            `json:"count"`
	Letters []admin.Letter `json:"dead_letters"`
}

func (h *dlqHandlers) list(w http.ResponseWriter, r *http.Request) {
	letters, err := h.dl.List(r.Context())
	if err != nil {
		h.fail(w, r, err, nil)
		return
	}
	if letters == nil {
		letters = []admin.Letter{}
	}
	writeJSON(w, http.StatusOK, letterList{Count: len(letters), Letters: letters})
}

func (h *dlqHandlers) show(w http.ResponseWriter, r *http.Request) {
	d, err := h.dl.Show(r.Context(), r.PathValue("id"))
	if err != nil {
		h.fail(w, r, err, nil)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

// replayBody is a replay request; Since is an RFC 3339 time or a
// duration back from now.
type replayBody struct {
	IDs    []string `json:"ids"`
	Reason string   `json:"reason"`
	Since  string   `json:"since"`
	All    bool     `json:"all"`
	DryRun bool     `json:"dry_run"`
}

func (h *dlqHandlers) replay(w http.ResponseWriter, r *http.Request) {
	var body replayBody
	if err := decode(w, r, &body); err != nil {
		h.fail(w, r, err, nil)
		return
	}
	req := admin.ReplayRequest{IDs: body.IDs, Reason: body.Reason, All: body.All, DryRun: body.DryRun, Actor: actor(r)}
	if body.Since != "" {
		var err error
		if req.Since, err = admin.ParseSince(body.Since, h.now()); err != nil {
			h.fail(w, r, err, nil)
			return
		}
	}
	rep, err := h.dl.Replay(r.Context(), req)
	h.answer(w, r, rep, err)
}

type discardBody struct {
	IDs []string `json:"ids"`
}

func (h *dlqHandlers) discard(w http.ResponseWriter, r *http.Request) {
	var body discardBody
	if err := decode(w, r, &body); err != nil {
		h.fail(w, r, err, nil)
		return
	}
	rep, err := h.dl.Discard(r.Context(), body.IDs, actor(r))
	h.answer(w, r, rep, err)
}

// answer writes rep, or err with what was done before the failure.
func (h *dlqHandlers) answer(w http.ResponseWriter, r *http.Request, rep admin.LetterReport, err error) {
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, rep)
	case len(rep.Items) == 0:
		h.fail(w, r, err, nil)
	default:
		h.fail(w, r, err, &rep)
	}
}

// fail answers err, with rep when some of the work was done.
func (h *dlqHandlers) fail(w http.ResponseWriter, r *http.Request, err error, rep *admin.LetterReport) {
	var report any
	if rep != nil {
		report = *rep
	}
	h.s.writeFailure(w, r, "dead-letter operation", err, report)
}

func actor(r *http.Request) string {
	if a := r.Header.Get(OperatorHeader); a != "" {
		return a
	}
	return DefaultOperator
}
