package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// QueueRate is one queue's message rates per second, as the RabbitMQ
// management API averages them (over its last few seconds).
type QueueRate struct {
	Publish, Deliver, Ack float64
}

// Management reads per-queue rates from the RabbitMQ management API
// (SURGE_RABBITMQ_MANAGEMENT_URL). The URL may carry the user and
// password (http://user:pass@host:15672/); without them User and Password
// are sent (the AMQP URL's, by convention).
type Management struct {
	URL            string
	VHost          string
	User, Password string
	// Client is the HTTP client; default one with a 3 s timeout.
	Client *http.Client
}

// NewManagement returns a reader of rawURL's API for the vhost and
// credentials of amqpURL (its first node), or an error naming what is
// wrong with rawURL.
func NewManagement(rawURL, amqpURL string) (*Management, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("SURGE_RABBITMQ_MANAGEMENT_URL must be an http(s) URL of the management API, like http://surge-ops:secret@rabbitmq:15672/")
	}
	m := &Management{URL: rawURL, VHost: "/"}
	if a, err := url.Parse(strings.Split(amqpURL, ",")[0]); err == nil {
		if v := strings.TrimPrefix(a.Path, "/"); v != "" {
			m.VHost = v
		}
		if a.User != nil {
			m.User = a.User.Username()
			m.Password, _ = a.User.Password()
		}
	}
	return m, nil
}

type mgmtQueue struct {
	Name  string `json:"name"`
	Stats struct {
		Publish rateDetails `json:"publish_details"`
		Deliver rateDetails `json:"deliver_get_details"`
		Ack     rateDetails `json:"ack_details"`
	} `json:"message_stats"`
}

type rateDetails struct {
	Rate float64 `json:"rate"`
}

// Rates reads every queue of the vhost: name to rates. A queue that has
// seen no message has zero rates.
func (m *Management) Rates(ctx context.Context) (map[string]QueueRate, error) {
	base, err := url.Parse(m.URL)
	if err != nil {
		return nil, fmt.Errorf("management URL: %w", err)
	}
	user, pass := m.User, m.Password
	if base.User != nil {
		user = base.User.Username()
		pass, _ = base.User.Password()
		base.User = nil
	}
	// The vhost is one path segment, "/" escaped as %2F.
	base.RawPath = strings.TrimSuffix(base.EscapedPath(), "/") + "/api/queues/" + url.PathEscape(m.VHost)
	base.Path, _ = url.PathUnescape(base.RawPath)
	base.RawQuery = "columns=name,message_stats"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("management API request: %w", err)
	}
	req.SetBasicAuth(user, pass)
	client := m.Client
	if client == nil {
		client = &http.Client{Timeout: 3 * time.Second}
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("RabbitMQ management API: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("RabbitMQ management API %s: %s", base.Redacted(), resp.Status)
	}
	var qs []mgmtQueue
	if err := json.NewDecoder(io.LimitReader(resp.Body, 8<<20)).Decode(&qs); err != nil {
		return nil, fmt.Errorf("RabbitMQ management API: read queues: %w", err)
	}
	out := make(map[string]QueueRate, len(qs))
	for _, q := range qs {
		out[q.Name] = QueueRate{Publish: q.Stats.Publish.Rate, Deliver: q.Stats.Deliver.Rate, Ack: q.Stats.Ack.Rate}
	}
	return out, nil
}
