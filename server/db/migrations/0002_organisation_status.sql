-- Migration 2: the organisation's status, which postguard-business keeps (`active`, `suspended`, `pending`)
-- and the PKG now honours: only a key of an `active` organisation signs. IF NOT EXISTS adopts a
-- business database that already has the column and keeps its values; organisations created here
-- before this migration become `active`, as they signed until now.

ALTER TABLE organizations ADD COLUMN IF NOT EXISTS status text NOT NULL DEFAULT 'active';
