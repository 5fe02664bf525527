// Package dashboard reads the panels of deploy/grafana-dashboard.json, for
// the tests that check them against the metrics the code records.
package dashboard

import (
	"encoding/json"
	"fmt"
	"os"
)

// Panel is one panel of the dashboard: its title and its PromQL queries.
type Panel struct {
	Title string
	Exprs []string
}

// Panels reads every panel of the dashboard at path, rows' panels
// included; rows themselves are not panels.
func Panels(path string) ([]Panel, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	type jpanel struct {
		Type    string `json:"type"`
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
		Panels []json.RawMessage `json:"panels"`
	}
	var dash struct {
		Panels []json.RawMessage `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var out []Panel
	var walk func([]json.RawMessage) error
	walk = func(ps []json.RawMessage) error {
		for _, r := range ps {
			var p jpanel
			if err := json.Unmarshal(r, &p); err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			if err := walk(p.Panels); err != nil {
				return err
			}
			if p.Type == "row" {
				continue
			}
			pn := Panel{Title: p.Title}
			for _, tg := range p.Targets {
				pn.Exprs = append(pn.Exprs, tg.Expr)
			}
			out = append(out, pn)
		}
		return nil
	}
	if err := walk(dash.Panels); err != nil {
		return nil, err
	}
	return out, nil
}
