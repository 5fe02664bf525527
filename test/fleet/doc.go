// Package fleet holds surge's fleet tests, behind the build tag "fleet"
// (make test-fleet, which brings deploy/fleet.sh's fleet up before them and
// down after). Each is a sale through HAProxy to buyers on four client
// addresses while one thing of the fleet fails: the RabbitMQ node leading
// the quorum queue, a gateway host, a worker host mid-batch, the link of
// the host holding the SKU's Redis master. Each first sees its fault take
// effect (a node's port refusing, a host unreachable and DOWN in HAProxy,
// a worker's consumers gone, a master refusing writes), so a fault that
// missed fails the test rather than passing as one survived. Each checks
// the sale at the end (every 202 invoiced once, nothing oversold, Redis
// equal to MySQL after a reconcile) and prints its figures: time without a
// final answer, answers by status, orders lost. The files run in the
// issue's order (s1..s4): the first kills the leader on a fresh fleet,
// where a gateway uses it.
package fleet
