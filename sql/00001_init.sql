-- Core tables of the order pipeline. MySQL is the truth about stock: an
-- invoice exists only when the guard UPDATE on products kept sold <= stock.
-- Identifiers (sku, order_id, customer_id) use a binary collation because
-- they are case-sensitive everywhere else (Redis keys, URLs, queue bodies).

-- +goose Up
CREATE TABLE products (
    sku         VARCHAR(64)  COLLATE utf8mb4_bin NOT NULL,
    name        VARCHAR(200) NOT NULL DEFAULT '',
    price_cents BIGINT       NOT NULL DEFAULT 0,
    stock       INT          NOT NULL,
    sold        INT          NOT NULL DEFAULT 0,
    created_at  DATETIME(3)  NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    updated_at  DATETIME(3)  NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),
    PRIMARY KEY (sku),
    CONSTRAINT products_sold_le_stock CHECK (sold <= stock),
    CONSTRAINT products_sold_nonneg CHECK (sold >= 0),
    CONSTRAINT products_price_nonneg CHECK (price_cents >= 0)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

CREATE TABLE orders (
    order_id    VARCHAR(40) COLLATE utf8mb4_bin NOT NULL,
    sku         VARCHAR(64) COLLATE utf8mb4_bin NOT NULL,
    qty         INT         NOT NULL,
    customer_id VARCHAR(64) COLLATE utf8mb4_bin NOT NULL DEFAULT '',
    status      VARCHAR(16) NOT NULL,
    reason      VARCHAR(64) NULL,
    fence       BIGINT      NOT NULL DEFAULT 0,
    created_at  DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    updated_at  DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),
    PRIMARY KEY (order_id),
    KEY orders_sku (sku),
    CONSTRAINT orders_status CHECK (status IN ('invoiced', 'rejected')),
    CONSTRAINT orders_qty_positive CHECK (qty > 0)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

CREATE TABLE invoices (
    invoice_id   BIGINT      NOT NULL AUTO_INCREMENT,
    order_id     VARCHAR(40) COLLATE utf8mb4_bin NOT NULL,
    sku          VARCHAR(64) COLLATE utf8mb4_bin NOT NULL,
    qty          INT         NOT NULL,
    amount_cents BIGINT      NOT NULL,
    created_at   DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    PRIMARY KEY (invoice_id),
    UNIQUE KEY invoices_order_id (order_id),
    KEY invoices_sku_qty (sku, qty)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- The highest fencing token seen per order, written in the same transaction
-- as the order, so a worker whose lock expired cannot overwrite a newer one.
CREATE TABLE order_fences (
    order_id   VARCHAR(40) COLLATE utf8mb4_bin NOT NULL,
    fence      BIGINT      NOT NULL,
    updated_at DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),
    PRIMARY KEY (order_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- +goose Down
DROP TABLE order_fences;
DROP TABLE invoices;
DROP TABLE orders;
DROP TABLE products;
