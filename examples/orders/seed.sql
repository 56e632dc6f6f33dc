-- The example's own data: an order desk shared by two tenants, acme and
-- globex. Idempotent: the demo runs it at every start.
CREATE TABLE IF NOT EXISTS customers (
    org_id     text        NOT NULL,
    id         text        NOT NULL,
    name       text        NOT NULL,
    email      text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (org_id, id)
);
CREATE TABLE IF NOT EXISTS products (
    org_id      text    NOT NULL,
    sku         text    NOT NULL,
    name        text    NOT NULL,
    price_cents integer NOT NULL CHECK (price_cents >= 0),
    PRIMARY KEY (org_id, sku)
);
CREATE TABLE IF NOT EXISTS orders (
    org_id           text        NOT NULL,
    id               text        NOT NULL,
    status           text        NOT NULL CHECK (status IN ('pending', 'paid', 'shipped', 'cancelled')),
    total_cents      integer     NOT NULL CHECK (total_cents >= 0),
    customer_id      text        NOT NULL,
    shipping_address text        NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (org_id, id),
    FOREIGN KEY (org_id, customer_id) REFERENCES customers (org_id, id)
);
CREATE TABLE IF NOT EXISTS order_notes (
    id         bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    org_id     text        NOT NULL,
    order_id   text        NOT NULL,
    note       text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (org_id, order_id) REFERENCES orders (org_id, id)
);

-- The server runs as orangerail_runtime: it reads all four tables and
-- writes only what the actions write. Row Level Security keeps it in the
-- tenant its transaction names, beside the engine's own tenant scoping.
GRANT SELECT ON customers, products, orders, order_notes TO orangerail_runtime;
GRANT UPDATE (status, shipping_address) ON orders TO orangerail_runtime;
GRANT INSERT (org_id, order_id, note) ON order_notes TO orangerail_runtime;

ALTER TABLE customers ENABLE ROW LEVEL SECURITY;
ALTER TABLE products ENABLE ROW LEVEL SECURITY;
ALTER TABLE orders ENABLE ROW LEVEL SECURITY;
ALTER TABLE order_notes ENABLE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS tenant ON customers;
DROP POLICY IF EXISTS tenant ON products;
DROP POLICY IF EXISTS tenant ON orders;
DROP POLICY IF EXISTS tenant ON order_notes;
CREATE POLICY tenant ON customers TO orangerail_runtime USING (org_id = current_setting('orangerail.tenant_id', true));
CREATE POLICY tenant ON products TO orangerail_runtime USING (org_id = current_setting('orangerail.tenant_id', true));
CREATE POLICY tenant ON orders TO orangerail_runtime USING (org_id = current_setting('orangerail.tenant_id', true));
CREATE POLICY tenant ON order_notes TO orangerail_runtime USING (org_id = current_setting('orangerail.tenant_id', true));

INSERT INTO customers (org_id, id, name, email) VALUES
    ('acme', 'c-1', 'Ada Lovelace', 'ada@example.com'),
    ('acme', 'c-2', 'Grace Hopper', 'grace@example.com'),
    ('globex', 'c-1', 'Hank Scorpio', 'hank@example.com')
ON CONFLICT DO NOTHING;
INSERT INTO products (org_id, sku, name, price_cents) VALUES
    ('acme', 'anvil', 'Anvil', 4999),
    ('acme', 'rocket-skates', 'Rocket skates', 12999),
    ('globex', 'doomsday-device', 'Doomsday device', 99999999)
ON CONFLICT DO NOTHING;
INSERT INTO orders (org_id, id, status, total_cents, customer_id, shipping_address) VALUES
    ('acme', 'o-1001', 'paid', 4999, 'c-1', '12 Analytical Row, London'),
    ('acme', 'o-1002', 'pending', 12999, 'c-2', '1 Compiler Way, Arlington'),
    ('acme', 'o-1003', 'shipped', 17998, 'c-1', '12 Analytical Row, London'),
    ('globex', 'o-1001', 'paid', 99999999, 'c-1', 'Cypress Creek')
ON CONFLICT DO NOTHING;
