-- Who replayed which dead letter, for which order, with what outcome.

-- +goose Up
CREATE TABLE dlq_replays (
    id             BIGINT      NOT NULL AUTO_INCREMENT,
    dead_letter_id VARCHAR(64) COLLATE utf8mb4_bin NOT NULL,
    order_id       VARCHAR(40) COLLATE utf8mb4_bin NOT NULL DEFAULT '',
    actor          VARCHAR(64) NOT NULL,
    outcome        VARCHAR(32) NOT NULL,
    at             DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    PRIMARY KEY (id),
    KEY dlq_replays_dead_letter (dead_letter_id),
    KEY dlq_replays_order (order_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- +goose Down
DROP TABLE dlq_replays;
