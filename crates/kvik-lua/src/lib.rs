//! kvik-lua: Redis 7.0's scripting runtime for kvik, without the server.
//!
//! It embeds Lua 5.1 (built from source, as Redis does) in Redis's sandbox and gives the
//! server two engines: [`EvalEngine`] (EVAL, EVALSHA, SCRIPT LOAD/EXISTS/FLUSH, with a
//! bounded script cache) and [`FunctionEngine`] (FUNCTION LOAD/LIST/DELETE/FLUSH/DUMP/RESTORE,
//! FCALL). Scripts reach the dataset only through the [`Host`] trait: each `redis.call` is one
//! `Host::call` returning the command's reply as a [`kvik_resp::Frame`]. Results are written
//! straight into the caller's RESP buffer for the client's protocol.
//!
//! # Layout
//!
//! - [`host`]: the [`Host`] trait (the server's side of a script).
//! - [`control`]: [`ScriptControl`], busy state and SCRIPT KILL / FUNCTION KILL.
//! - [`errors`]: Redis's error texts.
//! - [`flags`]: script flags and the `#!lua` line.
//! - [`script`]: SHA1 names and the `numkeys` rules.
//! - [`eval`], [`functions`]: the two engines.
//! - `runtime`, `sandbox.lua`: the Lua state, its protections, one run.
//! - `convert`: RESP <-> Lua conversions; `redis_lib`: the `redis` table.
//! - [`libs`]: `bit`, `struct`, `cjson`, `cmsgpack`.
//! - `args`, [`numfmt`]: Lua-style argument checks and number text.

#![deny(missing_debug_implementations)]

mod args;
pub mod control;
mod convert;
pub mod errors;
pub mod eval;
pub mod flags;
pub mod functions;
pub mod host;
pub mod libs;
pub mod numfmt;
mod redis_lib;
mod runtime;
pub mod script;

pub use control::ScriptControl;
pub use eval::EvalEngine;
pub use flags::ScriptFlags;
pub use functions::{FunctionEngine, FunctionInfo, RestorePolicy, RunningScript};
pub use host::{Host, HostReply, LogLevel, RunContext};
pub use redis_lib::{REDIS_VERSION, REDIS_VERSION_NUM};
pub use script::sha1_hex;
