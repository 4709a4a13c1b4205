//! kvik-server: a Redis-protocol key-value server that keeps every key on disk (RocksDB).
//!
//! # Layout
//!
//! One request, top to bottom:
//!
//! - [`net`]: I/O threads read sockets, parse requests (pipelined) with `kvik-resp`, and hand
//!   each connection's run of commands to the pool; they write the replies back.
//! - [`pool`]: worker threads behind the [`pool::Pool`] interface run the commands.
//! - [`cmd`]: the command table (one [`cmd::spec::CommandSpec`] per command) and the dispatcher
//!   that checks arity and auth, runs the handler and accounts stats; one module per family.
//! - [`storage`]: RocksDB with the documented key encoding, striped key locks, expiry.
//!
//! Around it: [`config`] (the settings table behind flags, config file and CONFIG), [`server`]
//! (shared state, startup, timer, shutdown), [`stats`] (INFO counters, slowlog), [`clients`]
//! (CLIENT LIST / KILL), [`session`] (per-connection state), [`slot`] (cluster key slots).

pub mod blocking;
pub mod cache;
pub mod clients;
pub mod clock;
pub mod cluster;
pub mod cmd;
pub mod config;
pub mod glob;
pub mod logging;
pub mod net;
pub mod pool;
pub mod server;
pub mod session;
pub mod slot;
pub mod stats;
pub mod storage;
pub mod watch;
