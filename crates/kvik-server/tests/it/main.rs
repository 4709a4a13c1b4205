//! Integration tests: each starts the real kvik-server binary on an ephemeral loopback port
//! with its own data directory and drives it with real clients (the `redis` crate, raw RESP over
//! TCP, redis-cli). One test binary, one module per area.

mod common;

mod admin;
mod cache;
mod durability;
mod keys;
mod protocol;
mod strings;
