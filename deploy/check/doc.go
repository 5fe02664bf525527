// Package check tests surge's deployment files against the code: docker-compose.yml with the
// Compose specification's loader, deploy/kubernetes/ with the Kubernetes API types, and (with
// the build tag image) the OCI image `make image` builds. It is a module of its own so that
// those libraries stay out of the product's go.mod; `make test-deploy` and `make test` run it.
package check
