//! Integration tests: each starts the real kvik-server binary on an ephemeral loopback port
//! with its own data directory and drives it with real clients (the `redis` crate, raw RESP over
//! TCP, redis-cli). One test binary, one module per area.

mod common;

mod acl;
mod admin;
mod bitmaps_hll_geo;
mod blocked_ready;
mod blocking;
mod cache;
mod cache_hashes;
mod cache_lists;
mod cache_sets;
mod cluster;
mod cluster_clients;
mod cluster_lease;
mod cluster_migration;
mod cluster_replicas;
mod config_rewrite;
mod config_sort;
mod differential;
mod disk_errors;
mod durability;
mod family_rtc;
mod group_commit;
mod hash_field_expiry;
mod hashes;
mod hot_keys;
mod io_balance;
mod io_poll;
mod keycount;
mod keys;
mod keys_collections;
mod lists;
mod min_replicas;
mod protocol;
mod pubsub;
mod rank_picks;
mod replication;
mod script_rtc;
mod scripting;
mod server_admin;
mod sets;
mod slow_lane;
mod stale_reads;
mod storage_scale;
mod streams;
mod strings;
mod tracking;
mod transactions;
mod write_batch;
mod zset_ranks;
mod zsets;
