-- A purchase limit per customer and SKU. products.max_per_customer is the
-- most units one customer may buy of the SKU (0: no limit); the worker's
-- transaction refuses an order past it, counting the customer's invoiced
-- units of the SKU:
--   WHERE sku = ? AND customer_id = ? AND status = 'invoiced'
-- which (sku, customer_id) reads without scanning the SKU's other orders.
-- The index is built online (ALGORITHM=INPLACE, LOCK=NONE): the statement
-- fails rather than block the workers' inserts on a large table.

-- +goose Up
ALTER TABLE products
    ADD COLUMN max_per_customer INT NOT NULL DEFAULT 0,
    ADD CONSTRAINT products_max_per_customer_nonneg CHECK (max_per_customer >= 0);
ALTER TABLE orders
    ADD KEY orders_sku_customer (sku, customer_id),
    ALGORITHM=INPLACE, LOCK=NONE;

-- +goose Down
ALTER TABLE orders
    DROP KEY orders_sku_customer,
    ALGORITHM=INPLACE, LOCK=NONE;
ALTER TABLE products
    DROP CONSTRAINT products_max_per_customer_nonneg,
    DROP COLUMN max_per_customer;
