-- A datasource with every case the scaffold decides: tenant columns,
-- a table without one, composite and missing keys, foreign keys within
-- and across schemas, and names the ontology cannot take.
CREATE TABLE organizations (id text PRIMARY KEY, name text NOT NULL);
CREATE TABLE customers (
  id bigint PRIMARY KEY, org_id text NOT NULL REFERENCES organizations (id),
  name text NOT NULL, email text, created_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE orders (
  id text PRIMARY KEY, org_id text NOT NULL, customer_id bigint NOT NULL REFERENCES customers (id),
  status text NOT NULL, total_cents integer NOT NULL, tags text[], payload jsonb,
  "Shipping Address" text, created_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE order_lines (
  order_id text REFERENCES orders (id), line integer, org_id text NOT NULL, sku text,
  PRIMARY KEY (order_id, line)
);
CREATE TABLE event_log (seq bigserial PRIMARY KEY, body text);
CREATE TABLE scratch (note text);
CREATE TABLE "Invoices" (
  "Id" uuid PRIMARY KEY, tenant_id text NOT NULL, "OrderId" text REFERENCES orders (id),
  "Payment State" text, state text, due date
);
CREATE TABLE "line items" (id int PRIMARY KEY, org_id text);
CREATE SCHEMA billing;
CREATE TABLE billing.payments (
  id uuid PRIMARY KEY, account_id text NOT NULL, order_id text REFERENCES orders (id),
  payment_status varchar(20), amount numeric(12,2), inserted_at timestamp
);
CREATE TABLE billing.orders (id int PRIMARY KEY, org_id text, "null" text);
-- Keys unique within a tenant, as the example's tables have them: the
-- other key column is the object's key, and a foreign key that pairs the
-- tenant columns is a link on the other pair.
CREATE TABLE products (org_id text, sku text, name text NOT NULL, PRIMARY KEY (org_id, sku));
CREATE TABLE reviews (
  org_id text, id text, sku text NOT NULL, review_state text, created_on date,
  PRIMARY KEY (org_id, id), FOREIGN KEY (org_id, sku) REFERENCES products (org_id, sku)
);
-- The tenants' own table: its key is the tenant column's name.
CREATE TABLE workspaces (workspace_id text PRIMARY KEY, name text);
-- An enum status is filtered by as a text one is; columns whose names say
-- they hold secrets are left out, those about one (token_id,
-- reset_token_expires_at) kept, as is one a secret noun only begins
-- (secretary).
CREATE TYPE ticket_status AS ENUM ('open', 'closed');
CREATE TABLE tickets (
  id bigint PRIMARY KEY, org_id text NOT NULL, status ticket_status NOT NULL, password_hash text,
  "apiToken" text, api_token text, token_id bigint, reset_token_expires_at timestamptz, "clientSecret" text,
  secretary text, usersecret text
);
