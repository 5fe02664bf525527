-- The operations console sorts SKUs by when stock was last loaded, and
-- names who ran each reconcile. products.updated_at moves with every sale,
-- so the load time gets a column of its own (NULL: loaded before it
-- existed; created_at stands in). reconcile_repairs.actor is the operator
-- who asked for the run, '' for the reconciler's schedule.

-- +goose Up
ALTER TABLE products ADD COLUMN loaded_at DATETIME(3) NULL;
ALTER TABLE reconcile_repairs ADD COLUMN actor VARCHAR(64) NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE reconcile_repairs DROP COLUMN actor;
ALTER TABLE products DROP COLUMN loaded_at;
