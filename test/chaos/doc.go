// Package chaos holds surge's chaos tests, behind the build tag "chaos"
// (make test-chaos; make test runs them after the other tests). They start
// a private Redis Cluster with deploy/redis-cluster.sh on free ports above
// 7100 (never the shared 7000-7005), run a gateway and a worker pool on it
// against the real RabbitMQ and MariaDB, break the cluster the ways a
// failover loses writes (README, Reconciler: a replica link cut then the
// master killed, a master paused past the node timeout; also a gateway
// dying between reserve and publish, and every master full), run the
// reconciler, and check surge's invariants.
package chaos
