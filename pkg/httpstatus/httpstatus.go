// Package httpstatus records the status code a handler answered with, for
// the middlewares that report it (metrics, traces).
package httpstatus

import "net/http"

// Writer is an http.ResponseWriter that remembers the status code written
// through it (200 when the handler wrote a body without a header).
type Writer struct {
	http.ResponseWriter
	// Status is the code answered.
	Status      int
	wroteHeader bool
}

// Wrap returns a Writer over w.
func Wrap(w http.ResponseWriter) *Writer {
	return &Writer{ResponseWriter: w, Status: http.StatusOK}
}

// WriteHeader records the first code and passes it on.
func (w *Writer) WriteHeader(code int) {
	if !w.wroteHeader {
		w.Status, w.wroteHeader = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

// Write marks the header written (as 200 unless set) and passes b on.
func (w *Writer) Write(b []byte) (int, error) {
	w.wroteHeader = true
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *Writer) Unwrap() http.ResponseWriter { return w.ResponseWriter }
