-- Every stock load, with who ran it and through what: the console
-- (its signed-in operator), opsctl ($SURGE_OPERATOR or the OS user) or the
-- admin API (X-Surge-Operator, else admin-api). Written in the same
-- transaction as the load, so a load that did not commit leaves no row.
-- stock_before is NULL when the load created the product.

-- +goose Up
CREATE TABLE stock_loads (
    id           BIGINT      NOT NULL AUTO_INCREMENT,
    sku          VARCHAR(64) COLLATE utf8mb4_bin NOT NULL,
    stock_before INT         NULL,
    stock_after  INT         NOT NULL,
    sold         INT         NOT NULL,
    actor        VARCHAR(64) NOT NULL,
    via          VARCHAR(16) NOT NULL,
    at           DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    PRIMARY KEY (id),
    KEY stock_loads_sku_at (sku, at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- +goose Down
DROP TABLE stock_loads;
