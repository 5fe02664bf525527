-- The reconciler looks for orders invoiced recently, per SKU:
--   WHERE sku = ? AND status = 'invoiced' AND created_at >= NOW(3) - INTERVAL ...
-- With only (sku) that reads every order the SKU ever had, which grows with
-- the sale; (sku, created_at) reads the lookback window only. It replaces
-- orders_sku, its leftmost prefix, which serves every other lookup by SKU,
-- so the workers' inserts maintain no more indexes than before.
-- ALGORITHM=INPLACE, LOCK=NONE builds it online: the statement fails rather
-- than block the workers' inserts on a large table.

-- +goose Up
ALTER TABLE orders
    ADD KEY orders_sku_created (sku, created_at),
    DROP KEY orders_sku,
    ALGORITHM=INPLACE, LOCK=NONE;

-- +goose Down
ALTER TABLE orders
    ADD KEY orders_sku (sku),
    DROP KEY orders_sku_created,
    ALGORITHM=INPLACE, LOCK=NONE;
