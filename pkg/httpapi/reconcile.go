package httpapi

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"time"

	"surge/pkg/admin"
)

// ReconcileAdmin runs reconciliations. *ops.Reconcile implements it.
type ReconcileAdmin interface {
	Run(ctx context.Context, req admin.ReconcileRequest) (admin.ReconcileReport, error)
}

// ReconcileBudget bounds one reconcile request, below the server's write
// timeout, so that the operator gets the report of what was done rather
// than a cut connection. A run that needs longer (every SKU of a large
// catalogue) belongs to the reconciler service or `opsctl reconcile`.
const ReconcileBudget = 8 * time.Second

// MountReconcile mounts the reconcile route, behind the admin token, on s
// (after s.Handler):
//
//	POST /v1/admin/reconcile  {"skus":[...],"dry_run":bool}, both optional
//
// No body, {} or an empty list reconciles every product. It answers 200
// with the report (admin.ReconcileReport) when every SKU ended consistent or
// repaired; 400 invalid_request for a bad body or SKU and 404 unknown_sku
// for a SKU MySQL does not know, nothing being reconciled then; 409
// conflict when a SKU was busy (another run held it: run again) and 503
// unavailable when a SKU or the run failed, both with the report beside
// "error". Messages are kept whole: the admin API speaks to operators.
func MountReconcile(s *Server, rc ReconcileAdmin) {
	h := &reconcileHandler{s: s, rc: rc}
	s.HandleAdmin("POST /v1/admin/reconcile", s.Admin(h.reconcile))
}

type reconcileHandler struct {
	s  *Server
	rc ReconcileAdmin
}

func (h *reconcileHandler) reconcile(w http.ResponseWriter, r *http.Request) {
	var req admin.ReconcileRequest
	if err := decodeOptional(w, r, &req); err != nil {
		h.fail(w, r, err, nil)
		return
	}
	req.Actor = actor(r)
	ctx, cancel := context.WithTimeout(r.Context(), ReconcileBudget)
	defer cancel()
	rep, err := h.rc.Run(ctx, req)
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, rep)
	case rep.StartedAt.IsZero():
		h.fail(w, r, err, nil)
	default:
		h.fail(w, r, err, &rep)
	}
}

// fail answers err, with the report when the run happened.
func (h *reconcileHandler) fail(w http.ResponseWriter, r *http.Request, err error, rep *admin.ReconcileReport) {
	var report any
	if rep != nil {
		report = *rep
	}
	h.s.writeFailure(w, r, "reconcile", err, report)
}

// decodeOptional is decode for a body that may be absent: an empty body
// leaves v as it is.
func decodeOptional(w http.ResponseWriter, r *http.Request, v any) error {
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		return decodeError(err)
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil
	}
	r.Body = io.NopCloser(bytes.NewReader(raw))
	return decode(w, r, v)
}
