package version_test

import (
	"bytes"
	"runtime"
	"strings"
	"testing"

	"surge/pkg/version"
)

func TestPrint(t *testing.T) {
	var b bytes.Buffer
	if err := version.Print(&b, "gateway"); err != nil {
		t.Fatal(err)
	}
	i := version.Get()
	want := "gateway version " + i.Version + " revision " + i.Revision + " " + runtime.Version() + "\n"
	if b.String() != want || i.Version == "" || i.Revision == "" {
		t.Fatalf("got %q, want %q", b.String(), want)
	}
	for _, args := range [][]string{{"--version"}, {"-version", "x"}} {
		if !version.IsFlag(args) {
			t.Errorf("%q is not taken for --version", args)
		}
	}
	for _, args := range [][]string{nil, {"serve"}, {"version"}, {"once", "--version"}} {
		if version.IsFlag(args) {
			t.Errorf("%q is taken for --version", args)
		}
	}
	if strings.Count(b.String(), "\n") != 1 {
		t.Fatalf("%q is not one line", b.String())
	}
}
