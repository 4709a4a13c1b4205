//! kvik-client: a Redis-protocol client for kvik-server and redis-server alike, built so that
//! thousands of threads can share a few connections and read many keys across many servers at
//! once.
//!
//! # What is here
//!
//! - [`Connection`]: one TCP connection shared by any number of threads and async tasks, with
//!   **auto-batch flush**: callers push encoded commands onto a lock-free queue and at most one
//!   of them at a time (the flusher) writes everything queued in one `write`, capped by count
//!   and bytes. There is no timer: a lone command goes out at once, batches form only under
//!   load. A reader thread matches replies to callers in order. Blocking calls
//!   ([`Connection::query`]) and futures ([`Connection::query_async`], no runtime needed) use
//!   the same connection. `ConnectOptions::batching(false)` turns batching off (one write per
//!   command) for comparison. See [`conn`] for the design.
//! - [`Client`]: a reconnecting handle over one connection; retries only idempotent commands,
//!   only when asked to.
//! - [`Commands`]: typed helpers for strings, hashes and keys on every client type, plus
//!   `query` for any other command ([`cmd`]); [`Pipeline`] for explicit batches and
//!   MULTI/EXEC.
//! - [`ShardedClient`]: independent servers behind a weighted, ketama-style consistent-hash
//!   [`Ring`], with [`ShardedClient::get_multi`]: every server's MGETs are written first, then
//!   all sockets are drained in one readiness loop under one deadline; the [`MultiGet`] result
//!   has each key's value, absence or unknown state and each server's [`ServerStatus`] (ok,
//!   timed out, failed, down). A failed server is marked down and retried after a backoff.
//! - [`ClusterClient`]: Redis Cluster routing from `CLUSTER SLOTS`, MOVED and ASK followed, one
//!   topology refresh at a time with a cooldown and jitter, multi-key commands split by slot,
//!   and the same concurrent `get_multi` over cluster nodes.
//!
//! - A local cache, off by default ([`ConnectOptions::local_cache`]): GETs of hot keys answered
//!   from the client's memory, kept consistent by the server's CLIENT TRACKING pushes on the
//!   same RESP3 connection ([`local_cache`] explains the protocol and its guarantees).
//!
//! RESP2 and RESP3 (`HELLO 3`), AUTH (with or without a user name), SELECT and CLIENT SETNAME
//! are handled on connect ([`ConnectOptions`]).
//!
//! # Example
//!
//! ```no_run
//! use std::sync::Arc;
//! use std::time::Duration;
//! use kvik_client::{cmd, Client, Commands, ConnectOptions, Proto, ShardOptions, ShardedClient};
//!
//! # fn main() -> kvik_client::Result<()> {
//! // One shared, auto-batching connection for all threads.
//! let opts = ConnectOptions::new()
//!     .proto(Proto::Resp3)
//!     .client_name("example")
//!     .timeout(Duration::from_millis(500));
//! let client = Arc::new(Client::connect("127.0.0.1:6379", opts)?);
//! let workers: Vec<_> = (0..8)
//!     .map(|t| {
//!         let c = client.clone();
//!         std::thread::spawn(move || c.set(format!("user:{t}"), "hello"))
//!     })
//!     .collect();
//! for w in workers {
//!     w.join().unwrap()?;
//! }
//! assert_eq!(client.get("user:3")?.as_deref(), Some(&b"hello"[..]));
//! let n = client.query(&cmd("DBSIZE"))?; // any other command
//! println!("{n:?}");
//!
//! // Many keys from several servers at once, with per-server status.
//! let ring = ShardedClient::new(
//!     &[("127.0.0.1:6380", 1), ("127.0.0.1:6381", 1), ("127.0.0.1:6382", 2)],
//!     ShardOptions::default(),
//! )?;
//! let r = ring.get_multi(&["a", "b", "c"]);
//! for s in &r.servers {
//!     println!("{} owns {} keys: {:?}", s.addr, s.keys, s.status);
//! }
//! println!("a = {:?}", r.get(0));
//!
//! // The same connection from async code, on any executor.
//! # let rt = tokio::runtime::Runtime::new().unwrap();
//! rt.block_on(async {
//!     client.set_async("k", "v").await?;
//!     let v = client.get_async("k").await?;
//!     assert_eq!(v.as_deref(), Some(&b"v"[..]));
//!     Ok::<_, kvik_client::Error>(())
//! })?;
//! # Ok(())
//! # }
//! ```
//!
//! # The twelve known complaints about multiplexing clients, and how each is avoided
//!
//! 1. **"Batching adds latency at low load."** No timer and no coalescing wait: the caller that
//!    finds no flusher running writes its own command at once, so a lone command costs one
//!    write, exactly as without batching (a test checks 200 sequential commands make 200
//!    writes). Batches only form from commands that arrive while a write is in progress.
//! 2. **Head-of-line blocking behind big values.** Writes are capped by `max_batch_bytes` and
//!    `max_batch_commands`; the reader parses continuously, so a big reply delays only the
//!    replies behind it on that connection. Callers with large values or slow commands can use
//!    a separate [`Client`] (connections are cheap), and `get_multi` uses its own sockets.
//! 3. **One error fails the whole batch.** Every caller has its own reply slot; an error reply
//!    goes only to its command, and a [`Pipeline`] returns one `Result` per command. Only a
//!    broken connection fails several callers, each with [`Error::ConnectionClosed`].
//! 4. **A timeout desynchronises the connection (wrong reply to the next caller).** A caller
//!    that times out marks its slot abandoned; the slot stays in the FIFO and consumes its own
//!    late reply, which is discarded. If it was still queued it is never written
//!    ([`Error::Timeout`] says which). Tests check both under load.
//! 5. **Reconnects lose, hang or replay in-flight commands.** On a break every queued and
//!    in-flight command fails at once with the reason; nothing hangs (the reader fails the
//!    FIFO, the flusher fails what it had). Nothing is replayed unless
//!    [`ConnectOptions::retries`] is set, and then only idempotent commands (reads, or
//!    [`Cmd::idempotent`]) on a fresh connection.
//! 6. **Topology refresh storms.** One refresh at a time per client (an atomic flag), at most
//!    one per cooldown plus a random jitter of up to half of it, asking a random known node;
//!    a MOVED updates the one slot immediately so routing does not wait for the refresh.
//! 7. **All-or-nothing multi-get.** [`MultiGet`] reports per key (hit, miss, unknown) and per
//!    server (ok, timed out, failed, down); one server's failure never hides the others'
//!    results. [`Commands::mget`] on a sharded client is the strict variant (any failure is an
//!    error), for callers who want that.
//! 8. **TCP deadlock when writing big batches without reading.** Each connection's reader thread
//!    always reads while the flusher writes; `get_multi`'s loop writes and reads each socket as
//!    readiness allows. Tests push 8 MiB values, 50,000-command pipelines and 20,000-key
//!    multi-gets.
//! 9. **MOVED/ASK inside automatic batches.** Redirects are handled per command, not per batch:
//!    each command re-routes on its own; ASK sends `ASKING` + the command as one pipeline so
//!    nothing can come between them; a multi-get's MGET answered with a redirect is retried
//!    alone after a refresh.
//! 10. **Blocking commands and transactions on a shared connection.** BLPOP and friends, XREAD
//!     BLOCK, WAIT, MULTI/EXEC/WATCH, SUBSCRIBE, MONITOR, SELECT, AUTH, HELLO and CLIENT REPLY
//!     are refused with [`Error::Refused`] on a shared connection. Transactions go through an
//!     atomic [`Pipeline`] (written contiguously, so safe to share); blocking commands need a
//!     dedicated connection with `ConnectOptions::allow_blocking`.
//! 11. **CPU cost of the flush strategy.** One write per batch, no timer thread, no wakeup of
//!     an I/O thread for the write (the caller writes), and [`ConnStats`] shows the batch size
//!     actually achieved. The flusher takes the whole queue with one atomic swap.
//! 12. **Unbounded queues.** At most `max_in_flight` commands are queued or awaiting replies per
//!     connection; a caller waits for room, and that wait counts against its timeout (so a
//!     saturated connection produces timeouts that never reached the server, not a backlog
//!     flushed on recovery).
//!
//! # Limits
//!
//! - Async futures carry no internal deadline (there is no timer in the core); wrap them in
//!   your runtime's timeout. Dropping a future abandons its command safely.
//! - A multi-get's fresh connects are non-blocking, but address resolution is not.
//! - The cluster client reads from masters only.

#![deny(missing_docs, missing_debug_implementations)]

mod client;
pub mod cluster;
mod cmd;
mod commands;
pub mod conn;
mod error;
pub mod local_cache;
mod multiget;
mod options;
pub mod ring;
mod sharded;

pub use client::Client;
pub use cluster::ClusterClient;
pub use cmd::{cmd, Cmd, Pipeline, ToArg};
pub use commands::Commands;
pub use conn::{ConnStats, Connection, PipelineFuture, ReplyFuture};
pub use error::{Error, Result};
pub use kvik_resp::{Frame, Proto};
pub use local_cache::LocalCacheStats;
pub use multiget::{KeyOutcome, MultiGet, ServerReport, ServerStatus};
pub use options::ConnectOptions;
pub use ring::Ring;
pub use sharded::{ShardOptions, ShardedClient};
