// Package loadgen drives HTTP load at surge's gateway (or any server that
// speaks the same POST /v1/orders contract) and measures it: closed-loop
// concurrency or an open-loop fixed rate, latency percentiles from an HDR
// histogram, counts per HTTP status, a time series of progress and of
// external probes (invoices written, queue depth), and the end-of-run
// correctness check (accepted == min(stock, demand), invoices == accepted,
// no oversell).
package loadgen
