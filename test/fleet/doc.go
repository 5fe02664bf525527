// Package fleet holds surge's fleet tests, behind the build tag "fleet"
// (make test-fleet, which brings deploy/fleet.sh's fleet up before them and
// down after). Each is a sale through HAProxy to buyers on four client
// addresses while one thing of the fleet fails: the RabbitMQ node leading
// the quorum queue, a gateway host, a worker host mid-batch, the link of
// the host holding the SKU's Redis master. Each checks the sale at the end
// (every 202 invoiced once, nothing oversold, Redis equal to MySQL after a
// reconcile) and prints its figures: time without a final answer, answers
// by status, orders lost. The files run in the order (s1..s4):
// the first kills the leader on a fresh fleet, where a gateway uses it.
package fleet
