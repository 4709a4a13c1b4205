//! kvik-server: a Redis-protocol key-value server that keeps every key on disk (RocksDB).
//!
//! # Layout
//!
//! One request, top to bottom:
//!
//! - [`net`]: I/O threads read sockets, parse requests (pipelined) with `kvik-resp`, answer
//!   cache hits through [`cmd::execute_cached`], and hand the rest of each connection's run to
//!   the pool as one job; they write the replies back.
//! - [`pool`]: worker threads behind the [`pool::Pool`] interface run the jobs.
//! - [`cmd`]: the command table (one [`cmd::spec::CommandSpec`] per command: the only place a
//!   command's behaviour is declared), the dispatcher, and the worker's job body
//!   ([`cmd::run`]); one module per family.
//! - [`storage`]: RocksDB with the documented key encoding, striped key locks, expiry.
//!
//! At the bottom, imported by every layer and importing none of them: [`error`] (typed Redis
//! errors), [`reply`] (arguments and the reply writer) and [`fast_hash`] (the seeded key hash
//! of the cache, the key locks and the request path's maps). Around the path: [`config`] (the
//! settings table behind flags, config file and CONFIG), [`server`] (shared state, timer,
//! shutdown), [`startup`] (wires the layers together), [`stats`] (INFO counters, slowlog),
//! [`clients`] (CLIENT LIST / KILL), [`session`] (per-connection state), [`blocking`] (the
//! registry of blocked clients), [`tracking`] (CLIENT TRACKING's invalidations), [`pause`]
//! (CLIENT PAUSE), [`slot`] (cluster key slots), [`scripting`] (the script cache, function
//! libraries and running scripts every thread shares), [`saves`] (SAVE / BGSAVE checkpoints and
//! their INFO fields), [`allocator`] (jemalloc's purge settings).

pub mod acl;
pub mod allocator;
pub mod blocking;
pub mod cache;
pub mod clients;
pub mod clock;
pub mod cluster;
pub mod cmd;
pub mod config;
pub mod error;
pub mod fast_hash;
pub mod key_list;
pub use kvik_types::glob;
pub mod logging;
pub mod net;
pub mod pause;
pub mod pool;
pub mod pubsub;
pub mod replication;
pub mod reply;
pub mod saves;
pub mod scripting;
pub mod server;
pub mod session;
pub mod slot;
pub mod startup;
pub mod stats;
pub mod storage;
pub mod tracking;
pub mod watch;
