// Package api embeds surge's HTTP contract, api/openapi.yaml, so the
// gateway serves it (GET /openapi.yaml) and tests validate against it.
package api

import _ "embed"

// OpenAPI is the OpenAPI 3 document of surge's HTTP API.
//
//go:embed openapi.yaml
var OpenAPI []byte
