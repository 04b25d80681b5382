-- Migration 4: per-key controls of our own, beside the business service's business_api_keys (never in it).
-- A row only for a key that has a budget or was made by `pg-pkg api-key rotate`; none means no budget.
-- budget_key: the id whose counters the key spends (its own, or, after a rotation, its predecessor's
-- budget_key), so that an old and a new key in their grace period share one budget.

CREATE TABLE pg_pkg_api_key_controls (
  key_id uuid PRIMARY KEY REFERENCES business_api_keys (id) ON DELETE CASCADE,
  budget_per_hour integer CHECK (budget_per_hour > 0),
  budget_per_day integer CHECK (budget_per_day > 0),
  budget_key uuid NOT NULL,
  rotated_from uuid REFERENCES business_api_keys (id) ON DELETE SET NULL,
  updated_at timestamptz NOT NULL DEFAULT now()
);
