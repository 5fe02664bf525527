package config

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// loadTLS builds r.tls from the SURGE_REDIS_TLS_* files. A file named
// while SURGE_REDIS_TLS is off is refused rather than ignored: it means
// the operator expected TLS, and silently speaking plain TCP would send
// the password in clear.
func (r *Redis) loadTLS() error {
	r.tls = nil
	if !r.TLS {
		for name, v := range map[string]string{"SURGE_REDIS_TLS_CA_FILE": r.TLSCAFile,
			"SURGE_REDIS_TLS_CERT_FILE": r.TLSCertFile, "SURGE_REDIS_TLS_KEY_FILE": r.TLSKeyFile,
			"SURGE_REDIS_TLS_SERVER_NAME": r.TLSServerName} {
			if v != "" {
				return fmt.Errorf("%s is set but SURGE_REDIS_TLS is not true: set SURGE_REDIS_TLS=true to speak TLS to Redis, or unset %s",
					name, name)
			}
		}
		return nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: r.TLSServerName}
	if r.TLSCAFile != "" {
		pem, err := os.ReadFile(r.TLSCAFile)
		if err != nil {
			return fmt.Errorf("SURGE_REDIS_TLS_CA_FILE: read the CA certificate: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("SURGE_REDIS_TLS_CA_FILE=%s: no PEM certificate in the file", r.TLSCAFile)
		}
		cfg.RootCAs = pool
	}
	switch {
	case r.TLSCertFile != "" && r.TLSKeyFile != "":
		cert, err := tls.LoadX509KeyPair(r.TLSCertFile, r.TLSKeyFile)
		if err != nil {
			return fmt.Errorf("SURGE_REDIS_TLS_CERT_FILE=%s, SURGE_REDIS_TLS_KEY_FILE=%s: load the client certificate: %w",
				r.TLSCertFile, r.TLSKeyFile, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	case r.TLSCertFile != "" || r.TLSKeyFile != "":
		return errors.New("SURGE_REDIS_TLS_CERT_FILE and SURGE_REDIS_TLS_KEY_FILE go together: set both (the client certificate and its key) or neither")
	}
	r.tls = cfg
	return nil
}
