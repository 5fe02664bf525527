package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"surge/tools/benchreport"
)

// report gathers a benchmark directory's parts into results.json, the
// table (printed, and saved as table.txt) and the plots (latency.svg,
// openloop.svg, sustained.svg).
func report(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("loadgen report", flag.ContinueOnError)
	dir := fs.String("dir", "var/bench", "directory holding the run's parts")
	if err := fs.Parse(args); err != nil {
		return err
	}
	parts, err := benchreport.ReadParts(*dir)
	if err != nil {
		return err
	}
	res := benchreport.Build(parts, benchreport.ReadMachine(time.Now()))
	if err := writeJSON(filepath.Join(*dir, "results.json"), res, stdout); err != nil {
		return err
	}
	var table bytes.Buffer
	if err := benchreport.WriteTable(&table, res); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	if err := os.WriteFile(filepath.Join(*dir, "table.txt"), table.Bytes(), 0o644); err != nil {
		return fmt.Errorf("report: write table: %w", err)
	}
	if _, err := stdout.Write(table.Bytes()); err != nil {
		return err
	}
	if err := writeFile(filepath.Join(*dir, "latency.svg"), func(w io.Writer) error {
		return benchreport.WriteLatencySVG(w, parts)
	}); err != nil {
		return err
	}
	if res.SoldOut != nil && len(res.SoldOut.OpenLoop) > 0 || len(res.AcceptingOpenLoop) > 0 {
		if err := writeFile(filepath.Join(*dir, "openloop.svg"), func(w io.Writer) error {
			return benchreport.WriteOpenLoopSVG(w, res)
		}); err != nil {
			return err
		}
	}
	if res.Sustained != nil {
		return writeFile(filepath.Join(*dir, "sustained.svg"), func(w io.Writer) error {
			return benchreport.WriteSustainedSVG(w, res.Sustained)
		})
	}
	return nil
}

func writeFile(path string, write func(io.Writer) error) error {
	var b bytes.Buffer
	if err := write(&b); err != nil {
		return fmt.Errorf("report: %s: %w", filepath.Base(path), err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("report: write %s: %w", filepath.Base(path), err)
	}
	return nil
}
