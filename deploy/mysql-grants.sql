-- MySQL grants of surge's service users, applied by deploy/users.sh after the migrations
-- (table grants need the tables). {db} is the database (SURGE_MYSQL_DATABASE, default surge),
-- {host} the users' host (SURGE_MYSQL_USER_HOST, default 127.0.0.1). Nobody but ops may DELETE,
-- DROP or ALTER; only the worker writes orders and invoices.

-- Every service reads the schema version at start and refuses a schema older than its build
-- (store.CheckSchema); only ops migrates.
GRANT SELECT ON `{db}`.`goose_db_version` TO 'surge-gateway'@'{host}';
GRANT SELECT ON `{db}`.`goose_db_version` TO 'surge-worker'@'{host}';
GRANT SELECT ON `{db}`.`goose_db_version` TO 'surge-reconciler'@'{host}';

-- Gateway: product lookups and order status; the admin API and console it hosts load stock
-- (products, audited in stock_loads) and record dead-letter replays and reconcile runs.
GRANT SELECT ON `{db}`.`orders` TO 'surge-gateway'@'{host}';
GRANT SELECT ON `{db}`.`invoices` TO 'surge-gateway'@'{host}';
GRANT SELECT, INSERT, UPDATE ON `{db}`.`products` TO 'surge-gateway'@'{host}';
GRANT SELECT, INSERT ON `{db}`.`dlq_replays` TO 'surge-gateway'@'{host}';
GRANT SELECT, INSERT ON `{db}`.`reconcile_repairs` TO 'surge-gateway'@'{host}';
GRANT SELECT, INSERT ON `{db}`.`stock_loads` TO 'surge-gateway'@'{host}';

-- Worker: the guarded stock update, order + invoice inserts, fencing tokens.
GRANT SELECT, UPDATE ON `{db}`.`products` TO 'surge-worker'@'{host}';
GRANT SELECT, INSERT ON `{db}`.`orders` TO 'surge-worker'@'{host}';
GRANT SELECT, INSERT ON `{db}`.`invoices` TO 'surge-worker'@'{host}';
GRANT SELECT, INSERT, UPDATE ON `{db}`.`order_fences` TO 'surge-worker'@'{host}';

-- Reconciler: reads the truth, records what it repaired. It never writes orders or stock.
GRANT SELECT ON `{db}`.`products` TO 'surge-reconciler'@'{host}';
GRANT SELECT ON `{db}`.`orders` TO 'surge-reconciler'@'{host}';
GRANT SELECT ON `{db}`.`invoices` TO 'surge-reconciler'@'{host}';
GRANT SELECT, INSERT ON `{db}`.`reconcile_repairs` TO 'surge-reconciler'@'{host}';

-- Operations: owns the schema (migrations) and the operator's tables.
GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, ALTER, DROP, INDEX, REFERENCES ON `{db}`.* TO 'surge-ops'@'{host}';

-- Exporter: no grant. It reads Redis and RabbitMQ only; its MySQL user exists so that every
-- service has the same name on every engine, and can do nothing there.
