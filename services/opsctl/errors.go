package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"surge/pkg/order"
	"surge/pkg/store"
)

// usageError marks a mistake in the command line (exit 2).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// exitError carries an exit code the command chose itself (reconcile
// reports its outcome with it), and the error to print, if any.
type exitError struct {
	code int
	err  error
}

func (e exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}

func (e exitError) Unwrap() error { return e.err }

// ranError is an error a command's own work returned (action); any other
// error came from cobra refusing the command line.
type ranError struct{ err error }

func (e ranError) Error() string { return e.err.Error() }
func (e ranError) Unwrap() error { return e.err }

// errorCode is the "code" of a JSON error and the exit code of err. An
// exitError's code wins (reconcile's codes); its error still names the
// JSON code.
func errorCode(err error) (string, int) {
	var ran ranError
	if !errors.As(err, &ran) {
		return "usage", exitUsage
	}
	code, exit := classify(err)
	var ee exitError
	if errors.As(err, &ee) {
		if code == "failed" {
			code = codeOfExit(ee.code)
		}
		exit = ee.code
	}
	return code, exit
}

// classify names a command's error and its usual exit code.
func classify(err error) (string, int) {
	var ue usageError
	switch {
	case errors.As(err, &ue):
		return "usage", exitUsage
	case errors.Is(err, order.ErrInvalid):
		return "invalid", exitUsage
	case errors.Is(err, store.ErrSchemaBehind):
		return "schema_behind", exitFailed
	case errors.Is(err, order.ErrUnavailable):
		return "unavailable", exitUnavailable
	case errors.Is(err, order.ErrNotFound), errors.Is(err, order.ErrUnknownSKU):
		return "not_found", exitNotFound
	}
	return "failed", exitFailed
}

// codeOfExit names an exit code a command chose (reconcile's).
func codeOfExit(code int) string {
	switch code {
	case exitUsage:
		return "failed" // reconcile's 2: a SKU or the run failed
	case exitUnavailable:
		return "busy" // reconcile's 3: run again later
	case exitNotFound:
		return "not_found"
	}
	return "failed"
}

// jsonError is what --json prints on stdout for a failure.
type jsonError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// report prints err (on stderr, and on stdout as JSON when asJSON) and
// returns the exit code. An exitError without an error has said all it
// had to in its report.
func report(cmd *cobra.Command, err error, asJSON bool, stdout, stderr io.Writer) int {
	code, exit := errorCode(err)
	var ee exitError
	if errors.As(err, &ee) && ee.err == nil {
		return exit
	}
	var ran ranError
	printed := errors.As(err, &ran) && errors.As(ran.err, new(reportedError))
	msg := strings.TrimSpace(err.Error())
	fmt.Fprintln(stderr, "opsctl:", msg)
	if code == "usage" && cmd != nil {
		fmt.Fprintf(stderr, "run '%s --help' for usage\n", cmd.CommandPath())
	}
	if asJSON && !printed {
		enc := json.NewEncoder(stdout)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(map[string]jsonError{"error": {Code: code, Message: msg}})
	}
	return exit
}

// reportedError is a failure whose JSON report already carries it
// (printJSONResult): report does not print a second document.
type reportedError struct{ err error }

func (e reportedError) Error() string { return e.err.Error() }
func (e reportedError) Unwrap() error { return e.err }

// jsonWithError adds "error" to v's JSON object (a report that has results
// and a failure at once: a broker lost midway, failing checks), so that
// stdout stays one document a script can parse.
func jsonWithError(v any, err error) (any, error) {
	raw, merr := json.Marshal(v)
	if merr != nil {
		return nil, merr
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil {
		return v, nil // not an object: the error goes on stderr only
	}
	code, _ := errorCode(ranError{err})
	e, _ := json.Marshal(jsonError{Code: code, Message: err.Error()})
	obj["error"] = e
	return obj, nil
}
