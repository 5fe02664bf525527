-- What the reconciler found and changed for a SKU, dry runs included, so an
-- operator can audit every repair after a failover.

-- +goose Up
CREATE TABLE reconcile_repairs (
    id      BIGINT      NOT NULL AUTO_INCREMENT,
    sku     VARCHAR(64) COLLATE utf8mb4_bin NOT NULL,
    found   JSON        NOT NULL,
    changed JSON        NOT NULL,
    dry_run BOOLEAN     NOT NULL DEFAULT FALSE,
    at      DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    PRIMARY KEY (id),
    KEY reconcile_repairs_sku_at (sku, at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- +goose Down
DROP TABLE reconcile_repairs;
