-- Migration 3: the PKG's audit trail, a table of our own (server/audit.ts). One row per signing-key
-- request and API-key validation, allowed or refused, and per pg-pkg api-key command. Never key material.
-- Append-only: UPDATE and TRUNCATE are refused, and DELETE unless the transaction has set
-- pg_pkg.audit_prune (what `pg-pkg audit prune` does). The grants of the PKG's role are the real guard.

CREATE TABLE pg_pkg_audit (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  at timestamptz NOT NULL DEFAULT clock_timestamp(),
  source text NOT NULL CHECK (source IN ('http', 'command')),
  operation text NOT NULL,
  outcome text NOT NULL CHECK (outcome IN ('allowed', 'refused')),
  error_code text,
  key_id text,
  org_id text,
  client_address text,
  user_agent text,
  os_user text,
  host text,
  details jsonb NOT NULL DEFAULT '{}'
);

CREATE INDEX pg_pkg_audit_at ON pg_pkg_audit (at);
CREATE INDEX pg_pkg_audit_key_at ON pg_pkg_audit (key_id, at);

CREATE FUNCTION pg_pkg_audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' AND current_setting('pg_pkg.audit_prune', true) = 'on' THEN
    RETURN OLD;
  END IF;
  RAISE EXCEPTION 'pg_pkg_audit is append-only: % refused', TG_OP;
END
$$;

CREATE TRIGGER pg_pkg_audit_append_only BEFORE UPDATE OR DELETE ON pg_pkg_audit
  FOR EACH ROW EXECUTE FUNCTION pg_pkg_audit_append_only();
CREATE TRIGGER pg_pkg_audit_no_truncate BEFORE TRUNCATE ON pg_pkg_audit
  FOR EACH STATEMENT EXECUTE FUNCTION pg_pkg_audit_append_only();
