//! kvik-client integration tests against real kvik-server and redis-server processes and
//! misbehaving fake servers.

mod cluster;
mod common;
mod conn;
mod local_cache;
mod multiget;
