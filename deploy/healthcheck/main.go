// Command healthcheck is the image's probe for container engines that run a command to check
// a container (docker-compose.yml's healthcheck): the image starts FROM scratch, so it has no
// shell and no curl.
//
//	healthcheck URL     GET URL (http:// only, within 3 s): exit 0 on a 2xx answer, 1 otherwise
//
// It speaks just enough HTTP/1.0 for the services' /readyz and /healthz, and stays small.
package main

import (
	"bufio"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"time"
)

const timeout = 3 * time.Second

func main() {
	if len(os.Args) != 2 || os.Args[1] == "-h" || os.Args[1] == "--help" || os.Args[1] == "help" {
		fmt.Fprintln(os.Stderr, "usage: healthcheck http://HOST:PORT/PATH   (exit 0 on a 2xx answer)")
		if len(os.Args) == 2 {
			os.Exit(0)
		}
		os.Exit(2)
	}
	status, err := get(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "healthcheck:", err)
		os.Exit(1)
	}
	fmt.Println(status)
	if !strings.HasPrefix(status, "2") {
		os.Exit(1)
	}
}

// get sends GET and returns the status of the answer ("200 OK").
func get(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return "", fmt.Errorf("%q: want http://HOST:PORT/PATH", raw)
	}
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), "80")
	}
	conn, err := net.DialTimeout("tcp", host, timeout)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(timeout))
	if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.0\r\nHost: %s\r\nUser-Agent: surge-healthcheck\r\n\r\n", u.RequestURI(), u.Host); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return "", fmt.Errorf("read the answer: %w", err)
	}
	// "HTTP/1.1 200 OK"
	proto, status, ok := strings.Cut(strings.TrimSpace(line), " ")
	if !ok || !strings.HasPrefix(proto, "HTTP/") {
		return "", fmt.Errorf("not an HTTP answer: %q", line)
	}
	return status, nil
}
