-- Migration 1: the part of the postguard-business schema that the PKG reads (API keys).
-- The tables are the business service's. IF NOT EXISTS lets `pg-pkg migrate` adopt a database where
-- that service already created them: it then records version 1 and changes nothing else.
-- Each migration runs in one transaction (server/db/migrate.ts); never edit one that has shipped.

CREATE TABLE IF NOT EXISTS users (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  email text NOT NULL,
  phone text,
  created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE IF NOT EXISTS organizations (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  name text NOT NULL UNIQUE,
  signing_email text NOT NULL,
  kvk_number text,
  contact_user_id uuid REFERENCES users (id) ON DELETE SET NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE IF NOT EXISTS business_api_keys (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  org_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  -- Lowercase hex SHA-256 of the whole key string, `PG-` prefix included; the key itself is never stored.
  key_hash text NOT NULL UNIQUE CHECK (key_hash ~ '^[0-9a-f]{64}$'),
  -- Which organisation attributes the key signs with: {"email", "orgName", "phone", "kvkNumber"} -> boolean.
  signing_attrs jsonb NOT NULL DEFAULT '{"email": true}',
  created_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL,
  revoked_at timestamptz,
  last_used_at timestamptz
);
