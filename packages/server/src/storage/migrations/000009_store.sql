-- The long-term store (DESIGN.md "Store"): one row per item, keyed by tenant, namespace and key.
-- ns_path is the namespace's segments joined by '/' (segments never hold '/'), in the C collation
-- so that a namespace prefix is a range of the primary key: 'a/b' or ['a/b/', 'a/b0').
-- search_text is the tsvector of the item's indexed fields (null when put with index false);
-- embedding is the embedder's vector of those fields (null without an embedder), kept as real[]
-- so that one schema serves databases with and without pgvector; embedding_norm is its length.
-- ttl_minutes is the item's own time to live (null: never expires), expires_at the instant it
-- expires (refreshed on read when asked).
create table store_items (
  tenant_id       text not null,
  ns_path         text collate "C" not null,
  key             text collate "C" not null,
  namespace       text[] not null,
  value           jsonb not null,
  search_text     tsvector,
  embedding       real[],
  embedding_norm  double precision,
  ttl_minutes     double precision,
  expires_at      timestamptz,
  created_at      timestamptz not null default now(),
  updated_at      timestamptz not null default now(),
  primary key (tenant_id, ns_path, key)
);
create index store_items_text on store_items using gin (search_text);
create index store_items_expiry on store_items (expires_at) where expires_at is not null;

-- pgvector, where the database offers it (PGlite ships it; a PostgreSQL server may not have it):
-- semantic search then ranks with its cosine distance operator, else by an exact scan in SQL.
do $$
begin
  if exists (select 1 from pg_available_extensions where name = 'vector') then
    begin
      create extension if not exists vector;
    exception when others then
      -- Offered but not allowed to this role: the exact scan serves instead.
      raise notice 'pgvector not created: %', sqlerrm;
    end;
  end if;
end
$$;
