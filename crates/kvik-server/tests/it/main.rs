//! Integration tests: each starts the real kvik-server binary on an ephemeral loopback port
//! with its own data directory and drives it with real clients (the `redis` crate, raw RESP over
//! TCP, redis-cli). One test binary, one module per area.

mod common;

mod admin;
mod bitmaps_hll_geo;
mod blocked_ready;
mod blocking;
mod cache;
mod cluster;
mod cluster_clients;
mod cluster_migration;
mod config_sort;
mod differential;
mod durability;
mod hashes;
mod keycount;
mod keys;
mod keys_collections;
mod lists;
mod protocol;
mod pubsub;
mod scripting;
mod sets;
mod storage_scale;
mod streams;
mod strings;
mod tracking;
mod transactions;
mod zsets;
