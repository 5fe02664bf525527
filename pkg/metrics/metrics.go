// Package metrics publishes surge's Prometheus metrics: HTTP latency by
// route and status, reservations, publisher confirms, worker outcomes,
// retries and dead letters, reconciler drift and repairs, locks, the
// product cache and rate limits, plus (cluster.go, queues.go) an exporter
// of the Redis Cluster's per-node health and the queues' depth.
//
// Every collector lives in Registry, so a process serves all of them on
// one Handler. Label values are bounded sets (outcomes, routes, node
// addresses): no SKU, customer or order id ever becomes a label; those go
// to the logs. The labelled series are created at zero when the package
// loads, so a dashboard shows flat lines rather than "no data" before the
// first order.
package metrics

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Namespace prefixes every surge metric.
const Namespace = "surge"

// Registry holds every surge collector plus the Go runtime and process
// collectors. Register extra collectors (the cluster exporter) here.
var Registry = prometheus.NewRegistry()

// Handler serves Registry in the Prometheus exposition format. Mount it on
// GET /metrics.
func Handler() http.Handler { return HandlerFor(Registry) }

// HandlerFor serves g: the exporter serves a registry of its own, so its
// scrape holds the cluster and the queues only.
func HandlerFor(g prometheus.Gatherer) http.Handler {
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{
		ErrorHandling:       promhttp.ContinueOnError,
		MaxRequestsInFlight: 4,
		Timeout:             10 * time.Second,
	})
}

// Latency buckets in seconds: the gateway answers in milliseconds, a worker
// transaction in tens of milliseconds, a stuck dependency in seconds.
var latencyBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

var (
	httpDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace, Name: "http_request_duration_seconds",
		Help:    "HTTP request latency by route pattern, method and status code.",
		Buckets: latencyBuckets,
	}, []string{"route", "method", "status"})

	reservations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "reservations_total",
		Help: "Stock reservations by outcome: reserved, repeat, sold_out, sold_out_cached (answered from a read of the SKU made for the order: no claim, no script, no write), not_loaded, error.",
	}, []string{"outcome"})
	releases = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "reservation_releases_total",
		Help: "Reservations the gateway took back after a failed publish or reservation, by mode (undo) and result: ok, kept (not its to undo: answered outcome_unknown), error.",
	}, []string{"mode", "result"})

	outcomeUnknown = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: Namespace, Name: "orders_outcome_unknown_total",
		Help: "Orders answered 503 outcome_unknown: the gateway could not know whether RabbitMQ took them; they keep their reservation until they settle.",
	})

	publishes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "publish_total",
		Help: "Order publishes by broker answer: confirmed, nacked, returned, timeout (no confirm in time), blocked (a resource alarm, nothing written), unknown (channel lost or caller gone after the write), error.",
	}, []string{"result"})
	publishDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: Namespace, Name: "publish_duration_seconds",
		Help:    "Time from publish to the broker's confirm (or failure).",
		Buckets: latencyBuckets,
	})
	publishBatch = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: Namespace, Name: "publish_batch_orders",
		Help:    "Orders per message the gateway sent: the orders published while a confirm was outstanding travel together (1-64).",
		Buckets: []float64{1, 2, 4, 8, 16, 32, 64},
	})

	workerOrders = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "worker_orders_total",
		Help: "Deliveries handled by the worker, by outcome: invoiced; rejected (an accepted order MySQL refused: the compensation after Redis lost writes, reason sold_out_after_acceptance, or purchase_limit_after_acceptance past the customer's purchase limit); duplicate; conflict (the order id reused for another request after a failover lost its idempotency record: not invoiced); retried; dead.",
	}, []string{"outcome"})
	acceptedToInvoiced = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: Namespace, Name: "order_accepted_to_invoiced_seconds",
		Help:    "Time from an order's acceptance at the gateway (its clock) to its invoice in MySQL.",
		Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900},
	})

	buildInfo = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace, Name: "build_info",
		Help: "Always 1, labelled with the build: the module version, the VCS revision and the Go version.",
	}, []string{"version", "revision", "goversion"})

	workerDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace, Name: "worker_processing_seconds",
		Help:    "Time the worker spent on one delivery, by outcome.",
		Buckets: latencyBuckets,
	}, []string{"outcome"})
	retries = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: Namespace, Name: "retries_total",
		Help: "Deliveries sent to a retry tier.",
	})
	deadLetters = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: Namespace, Name: "dead_letters_total",
		Help: "Deliveries parked in the dead-letter queue.",
	})

	reconcileDrift = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "reconcile_drift_total",
		Help: "Differences between Redis and MySQL the reconciler found, by kind.",
	}, []string{"kind"})
	reconcileRepairs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "reconcile_repairs_total",
		Help: "Differences the reconciler repaired, by kind.",
	}, []string{"kind"})
	reconcileRuns = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "reconcile_runs_total",
		Help: "Reconciler passes by result: ok, error.",
	}, []string{"result"})
	reconcileDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: Namespace, Name: "reconcile_duration_seconds",
		Help:    "Duration of one reconciler pass.",
		Buckets: prometheus.ExponentialBuckets(0.01, 4, 8),
	})
	reconcileLastSuccess = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: Namespace, Name: "reconcile_last_success_timestamp_seconds",
		Help: "Unix time of the last reconciler pass that ended without error.",
	})

	lockAcquisitions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "lock_acquisitions_total",
		Help: "Distributed lock attempts by result: acquired, contended (held by another owner), error.",
	}, []string{"result"})
	lockWait = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: Namespace, Name: "lock_wait_seconds",
		Help:    "Time spent obtaining a distributed lock, retries included.",
		Buckets: latencyBuckets,
	})

	cacheRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "cache_requests_total",
		Help: "Product cache reads by result: hit, miss.",
	}, []string{"result"})
	cacheRebuilds = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "cache_rebuilds_total",
		Help: "Product cache rebuilds by result: ok, error.",
	}, []string{"result"})

	rateLimited = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "rate_limit_decisions_total",
		Help: "Rate-limit decisions by scope (customer, ip) and decision (allowed, limited, error).",
	}, []string{"scope", "decision"})
)

// Label values created at zero when the package loads.
var (
	reservationOutcomes = []string{ReservationReserved, ReservationRepeat, ReservationSoldOut, ReservationPurchaseLimit, ReservationSoldOutCached, ReservationNotLoaded, ReservationError}
	publishResults      = []string{PublishConfirmed, PublishNacked, PublishReturned, PublishTimeout, PublishBlocked, PublishUnknown, PublishError}
	workerOutcomes      = []string{"invoiced", "rejected", "duplicate", "conflict", "retried", "dead"}
	driftKinds          = []string{DriftCommitMissing, DriftStaleReservation, DriftSoldMismatch, DriftStockMismatch, DriftNotLoaded}
)

func init() {
	setBuildInfo()
	Registry.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		httpDuration, reservations, releases, outcomeUnknown, publishes, publishDuration, publishBatch,
		workerOrders, workerDuration, acceptedToInvoiced, buildInfo, retries, deadLetters,
		reconcileDrift, reconcileRepairs, reconcileRuns, reconcileDuration, reconcileLastSuccess,
		lockAcquisitions, lockWait, cacheRequests, cacheRebuilds, rateLimited,
		workerBatches, workerBatchOrders,
	)
	for _, o := range reservationOutcomes {
		reservations.WithLabelValues(o)
	}
	for _, r := range []string{"ok", "kept", "error"} {
		releases.WithLabelValues("undo", r)
	}
	for _, r := range publishResults {
		publishes.WithLabelValues(r)
	}
	for _, o := range workerOutcomes {
		workerOrders.WithLabelValues(o)
		workerDuration.WithLabelValues(o)
	}
	for _, k := range driftKinds {
		reconcileDrift.WithLabelValues(k)
		reconcileRepairs.WithLabelValues(k)
	}
	for _, r := range []string{"ok", "error"} {
		reconcileRuns.WithLabelValues(r)
		cacheRebuilds.WithLabelValues(r)
	}
	for _, r := range []string{LockAcquired, LockContended, LockError} {
		lockAcquisitions.WithLabelValues(r)
	}
	for _, r := range []string{"hit", "miss"} {
		cacheRequests.WithLabelValues(r)
	}
	for _, s := range []string{"customer", "ip"} {
		for _, d := range []string{"allowed", "limited", "error"} {
			rateLimited.WithLabelValues(s, d)
		}
	}
}
