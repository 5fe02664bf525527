package lua

import (
	_ "embed"
	"strings"
)

//go:embed gcra.lua
var gcraSrc string

// withGCRA puts the gcra function (lua/gcra.lua) in front of a script that
// calls it: Redis runs each script alone, so the rate-limit scripts share
// the algorithm's one source this way rather than by a copy.
// The script's shebang line (its flags) must stay first.
func withGCRA(src string) string {
	if shebang, body, ok := strings.Cut(src, "\n"); ok && strings.HasPrefix(shebang, "#!") {
		return shebang + "\n" + gcraSrc + body
	}
	return gcraSrc + src
}
