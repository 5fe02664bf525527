package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"surge/pkg/order"
)

// MaxBodyBytes bounds every request body; larger ones get 413.
const MaxBodyBytes = 4 << 10

// decode reads exactly one JSON object into v, refusing unknown fields,
// wrong types, trailing data and oversized bodies with specific messages.
func decode(w http.ResponseWriter, r *http.Request, v any) error {
	// The body is read as JSON whatever Content-Type says: curl -d sends
	// application/x-www-form-urlencoded, and a wrong header is no reason
	// to refuse a well-formed order.
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(err)
	}
	if dec.More() {
		return order.Invalid("body must hold a single JSON object")
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return order.Invalid("body must hold a single JSON object")
	}
	return nil
}

func decodeError(err error) error {
	var maxErr *http.MaxBytesError
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &maxErr):
		return &apiError{http.StatusRequestEntityTooLarge, "body_too_large", fmt.Sprintf("request body exceeds %d bytes", maxErr.Limit)}
	case errors.Is(err, io.EOF):
		return order.Invalid("request body is empty")
	case errors.As(err, &typeErr):
		return order.Invalid("field %s must be %s", typeErr.Field, typeName(typeErr.Type.Kind().String()))
	case errors.As(err, &syntaxErr), errors.Is(err, io.ErrUnexpectedEOF):
		return order.Invalid("body is not valid JSON")
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return order.Invalid("unknown field %s", strings.TrimPrefix(err.Error(), "json: unknown field "))
	}
	return order.Invalid("body is not valid JSON")
}

func typeName(kind string) string {
	switch kind {
	case "int", "int64", "int32":
		return "an integer"
	case "string":
		return "a string"
	case "struct":
		return "an object"
	}
	return "a " + kind
}
