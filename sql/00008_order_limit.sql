-- The purchase limit per customer each order was accepted under: the one
-- Redis applied when it reserved the order, which the order's message
-- carries (0: the SKU had none), or, for a message that does not say (a
-- gateway of an earlier version), the product's limit when the worker
-- wrote the order. The worker's guard counts a customer's invoiced units
-- of orders accepted under a limit against the loosest of those limits,
-- the order's own and the product's (see store.Process), so a limit
-- changed after orders were accepted turns none of them into a rejection.
-- NULL for the orders written before: their units count, their limit is
-- not known. Adding a nullable column is instant: no table copy, no lock
-- held over the workers' inserts.

-- +goose Up
ALTER TABLE orders
    ADD COLUMN max_per_customer INT NULL,
    ALGORITHM=INSTANT;

-- +goose Down
ALTER TABLE orders
    DROP COLUMN max_per_customer;
