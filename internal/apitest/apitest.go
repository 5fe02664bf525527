// Package apitest holds the tests' HTTP traffic to a gateway to surge's
// contract, api/openapi.yaml: Transport validates every request before it
// is sent and every answer once it is received, and reports what does not
// conform as a test error naming the operation, the status and why.
//
// A test that sends a request outside the contract on purpose (a bad body,
// a missing header) marks it with Invalid: its answer is still validated,
// and the request must indeed violate the document.
package apitest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"surge/api"
)

// Validator checks requests and answers against one OpenAPI document.
// It is safe for concurrent use.
type Validator struct {
	router routers.Router
	opts   *openapi3filter.Options
}

// New loads and validates an OpenAPI 3 document (YAML or JSON). Its
// servers are ignored: requests are routed by path alone, whatever host
// and port the gateway under test listens on.
func New(spec []byte) (*Validator, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(spec)
	if err != nil {
		return nil, fmt.Errorf("load OpenAPI document: %w", err)
	}
	doc.Servers = nil
	if err := doc.Validate(loader.Context); err != nil {
		return nil, fmt.Errorf("OpenAPI document is not valid: %w", err)
	}
	router, err := legacy.NewRouter(doc)
	if err != nil {
		return nil, fmt.Errorf("route OpenAPI document: %w", err)
	}
	return &Validator{router: router, opts: &openapi3filter.Options{
		// An answer with a status the operation does not list fails.
		IncludeResponseStatus: true,
		// The admin routes' bearer token is the gateway's to check (tests
		// send wrong and missing tokens on purpose): any request passes
		// the document's security requirement, and the 401 it may get is
		// validated like any answer.
		AuthenticationFunc:  openapi3filter.NoopAuthenticationFunc,
		SkipSettingDefaults: true,
	}}, nil
}

// Default is the Validator of api.OpenAPI, the document the gateway
// serves.
var Default = sync.OnceValues(func() (*Validator, error) { return New(api.OpenAPI) })

// Transport wraps next (http.DefaultTransport when nil) so that every
// request and answer through it is validated against api.OpenAPI; a
// failure is reported with t.Errorf, and the exchange goes on as it
// would without the check.
func Transport(t testing.TB, next http.RoundTripper) http.RoundTripper {
	t.Helper()
	v, err := Default()
	if err != nil {
		t.Fatalf("api/openapi.yaml: %v", err)
	}
	return v.Transport(t, next)
}

// Client is an http.Client whose every exchange is validated against
// api.OpenAPI (see Transport).
func Client(t testing.TB) *http.Client {
	t.Helper()
	return &http.Client{Transport: Transport(t, nil)}
}

type invalidKey struct{}

// Invalid marks req as deliberately outside the contract (a malformed
// body, a missing or malformed header, a value out of range): Transport
// does not report the request's violation, but does report such a request
// that conforms after all (the document would be looser than the test
// believes), and validates its answer as usual.
func Invalid(req *http.Request) *http.Request {
	return req.WithContext(context.WithValue(req.Context(), invalidKey{}, true))
}

func markedInvalid(req *http.Request) bool {
	v, _ := req.Context().Value(invalidKey{}).(bool)
	return v
}

// Transport is the package's Transport with this Validator's document.
func (v *Validator) Transport(t testing.TB, next http.RoundTripper) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	return &transport{v: v, t: t, next: next}
}

type transport struct {
	v    *Validator
	t    testing.TB
	next http.RoundTripper
}

// RoundTrip validates req, sends it, then validates the answer. Bodies are
// read whole and handed on intact.
func (tr *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	body, err := drain(req.Body)
	if err != nil {
		return nil, fmt.Errorf("apitest: read request body: %w", err)
	}
	what := req.Method + " " + req.URL.RequestURI()
	ex, err := tr.v.CheckRequest(req, body)
	invalid := markedInvalid(req)
	switch {
	case ex == nil:
		tr.t.Errorf("openapi: %s: not an operation of the document: %v", what, err)
	case invalid && err == nil:
		tr.t.Errorf("openapi: %s (%s): request marked apitest.Invalid conforms to the document; body %s",
			what, ex.Operation(), clip(body))
	case !invalid && err != nil:
		tr.t.Errorf("openapi: %s (%s): request does not conform: %v\nbody: %s", what, ex.Operation(), err, clip(body))
	}

	out := req.Clone(req.Context())
	if req.Body != nil {
		out.Body, out.ContentLength = bodyOf(body), int64(len(body))
		out.GetBody = func() (io.ReadCloser, error) { return bodyOf(body), nil }
	}
	resp, err := tr.next.RoundTrip(out)
	if err != nil || ex == nil {
		return resp, err
	}
	data, rerr := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if rerr != nil {
		// The answer was cut off: hand on what came and the error, and
		// leave the half answer unjudged.
		resp.Body = io.NopCloser(io.MultiReader(bytes.NewReader(data), errReader{rerr}))
		return resp, nil
	}
	resp.Body = bodyOf(data)
	if err := ex.CheckResponse(resp, data); err != nil {
		tr.t.Errorf("openapi: %s (%s) answered %d: answer does not conform: %v\nbody: %s",
			what, ex.Operation(), resp.StatusCode, err, clip(data))
	}
	return resp, nil
}

// Exchange is a request routed to an operation of the document, whose
// answer can then be checked.
type Exchange struct {
	v     *Validator
	route *routers.Route
	input *openapi3filter.RequestValidationInput
}

// Operation names the operation, as "METHOD /path/{template}".
func (ex *Exchange) Operation() string { return ex.route.Method + " " + ex.route.Path }

// CheckRequest routes req (whose body is body; req.Body is not read) to
// an operation of the document and validates it. The Exchange is nil when
// the document has no such operation; otherwise the error says how the
// request does not conform, and the Exchange can still check the answer.
//
// The gateway reads every body as JSON whatever its Content-Type says
// (pkg/httpapi/decode.go), so a body sent without a Content-Type is
// validated as application/json.
func (v *Validator) CheckRequest(req *http.Request, body []byte) (*Exchange, error) {
	vreq := req.Clone(context.Background())
	vreq.Body, vreq.GetBody = bodyOf(body), nil
	vreq.ContentLength = int64(len(body))
	if len(body) > 0 && vreq.Header.Get("Content-Type") == "" {
		vreq.Header.Set("Content-Type", "application/json")
	}
	route, params, err := v.router.FindRoute(vreq)
	if err != nil {
		return nil, err
	}
	ex := &Exchange{v: v, route: route, input: &openapi3filter.RequestValidationInput{
		Request: vreq, PathParams: params, Route: route, Options: v.opts,
	}}
	if err := openapi3filter.ValidateRequest(context.Background(), ex.input); err != nil {
		return ex, err
	}
	return ex, oneJSONValue(vreq.Header, body)
}

// CheckResponse validates an answer to the exchange's request: status,
// headers and body (data; resp.Body is not read).
func (ex *Exchange) CheckResponse(resp *http.Response, data []byte) error {
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: ex.input,
		Status:                 resp.StatusCode,
		Header:                 resp.Header,
		Options:                ex.v.opts,
	}
	in.SetBodyBytes(data)
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		return err
	}
	return oneJSONValue(resp.Header, data)
}

// oneJSONValue refuses a JSON body holding more than one value: the
// validator reads the first one only.
func oneJSONValue(h http.Header, body []byte) error {
	mt, _, _ := mime.ParseMediaType(h.Get("Content-Type"))
	if len(body) == 0 || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
		return nil
	}
	if !json.Valid(body) {
		return errors.New("body is not a single JSON value")
	}
	return nil
}

func drain(rc io.ReadCloser) ([]byte, error) {
	if rc == nil || rc == http.NoBody {
		return nil, nil
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

func bodyOf(b []byte) io.ReadCloser {
	if len(b) == 0 {
		return http.NoBody
	}
	return io.NopCloser(bytes.NewReader(b))
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// clip shortens a body for an error message.
func clip(b []byte) string {
	const limit = 1024
	if len(b) > limit {
		return fmt.Sprintf("%q… (%d bytes)", b[:limit], len(b))
	}
	return fmt.Sprintf("%q", b)
}
