package lua

import _ "embed"

//go:embed gcra.lua
var gcraSrc string

// withGCRA puts the gcra function (lua/gcra.lua) in front of a script that
// calls it: Redis runs each script alone, so the rate-limit scripts share
// the algorithm's one source this way rather than by a copy.
func withGCRA(src string) string { return gcraSrc + src }
