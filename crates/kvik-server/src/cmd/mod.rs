//! The command table and the dispatcher.
//!
//! Each family module (`string`, `keys`, `conn`, `admin`) exports a `COMMANDS` slice of
//! [`CommandSpec`]s; [`table()`] joins them once into a [`CommandTable`] with a numeric id per
//! command and subcommand (the index of its statistics). [`execute`] runs one command the same
//! way wherever it runs: resolve the spec (unknown command, subcommand, arity), check auth, run the
//! handler, render its error, and account stats and slowlog.

pub mod admin;
pub mod client;
pub mod cluster;
pub mod collection;
pub mod conn;
pub mod ctx;
pub mod hash;
pub mod keys;
pub mod list;
pub mod migrate;
pub mod multi;
pub mod set;
pub mod spec;
pub mod string;
pub mod zset;

use crate::server::Server;
use crate::session::Session;
use ctx::{Args, CmdError, Ctx, Mode, Reply};
use spec::{CommandSpec, Flags};
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// One resolved command or subcommand.
#[derive(Debug)]
pub struct Entry {
    pub spec: &'static CommandSpec,
    /// "get", or "config|get" for a subcommand (Redis's full name, used in errors and stats).
    pub full_name: String,
    /// Index into per-command statistics.
    pub id: usize,
    /// May run to completion on an I/O thread when the cache holds its keys (see [`RTC`]).
    pub rtc: bool,
    /// For containers: subcommand name -> entry id.
    subs: HashMap<&'static str, usize>,
}

#[derive(Debug)]
pub struct CommandTable {
    entries: Vec<Entry>,
    top: HashMap<&'static str, usize>,
}

/// Commands answered on the I/O thread (run-to-completion) when the hot cache holds every key
/// they read. Each is read-only, cheap in memory, and reads keys only through
/// `Ctx::lookup_read` / `Ctx::read_string` (checked by `rtc_commands_only_read` and, at run time,
/// by `Ctx::storage` refusing [`Mode::CacheOnly`]).
pub const RTC: &[&str] = &[
    "get",
    "hget",
    "mget",
    "strlen",
    "getrange",
    "substr",
    "exists",
    "type",
    "ttl",
    "pttl",
    "expiretime",
    "pexpiretime",
];

/// Longest command or subcommand name that can exist; longer names are unknown without lookup.
const MAX_NAME: usize = 32;

impl CommandTable {
    fn build(families: &[&'static [CommandSpec]]) -> CommandTable {
        let mut table = CommandTable {
            entries: Vec::new(),
            top: HashMap::new(),
        };
        for spec in families.iter().flat_map(|f| f.iter()) {
            let id = table.push(spec, spec.name.to_string());
            let prev = table.top.insert(spec.name, id);
            assert!(prev.is_none(), "duplicate command {}", spec.name);
            for sub in spec.subcommands {
                let sid = table.push(sub, format!("{}|{}", spec.name, sub.name));
                table.entries[id].subs.insert(sub.name, sid);
            }
        }
        table
    }

    fn push(&mut self, spec: &'static CommandSpec, full_name: String) -> usize {
        let id = self.entries.len();
        let rtc = RTC.contains(&full_name.as_str());
        self.entries.push(Entry {
            spec,
            full_name,
            id,
            rtc,
            subs: HashMap::new(),
        });
        id
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn entry(&self, id: usize) -> &Entry {
        &self.entries[id]
    }

    /// Top-level commands, in table order.
    pub fn top_level(&self) -> impl Iterator<Item = &Entry> {
        self.entries.iter().filter(|e| !e.full_name.contains('|'))
    }

    /// The subcommand entries of a container.
    pub fn subcommands<'a>(&'a self, e: &'a Entry) -> impl Iterator<Item = &'a Entry> {
        e.spec
            .subcommands
            .iter()
            .map(move |s| &self.entries[e.subs[s.name]])
    }

    /// Finds a top-level command by name, case-insensitively, without allocating.
    pub fn lookup(&self, name: &[u8]) -> Option<&Entry> {
        let mut buf = [0u8; MAX_NAME];
        let lower = lowercase_into(name, &mut buf)?;
        let id = *self.top.get(std::str::from_utf8(lower).ok()?)?;
        Some(&self.entries[id])
    }

    fn lookup_sub(&self, container: &Entry, name: &[u8]) -> Option<&Entry> {
        let mut buf = [0u8; MAX_NAME];
        let lower = lowercase_into(name, &mut buf)?;
        let id = *container.subs.get(std::str::from_utf8(lower).ok()?)?;
        Some(&self.entries[id])
    }

    /// Resolves `args` to the entry that runs them, with Redis's rejection errors. A rejected
    /// known command comes back with its entry id, so its `rejected_calls` can be counted.
    pub fn resolve(&self, args: &Args) -> Result<&Entry, (Option<usize>, CmdError)> {
        let Some(entry) = self.lookup(&args[0]) else {
            return Err((None, unknown_command(args)));
        };
        let arity_checked = |e: &'_ Entry| -> Result<(), (Option<usize>, CmdError)> {
            if e.spec.arity_ok(args.len()) {
                Ok(())
            } else {
                Err((Some(e.id), CmdError::wrong_args(&e.full_name)))
            }
        };
        // A container runs itself when called bare and its arity allows it (plain COMMAND).
        if entry.spec.subcommands.is_empty() || args.len() < 2 {
            return arity_checked(entry).map(|()| entry);
        }
        let Some(sub) = self.lookup_sub(entry, &args[1]) else {
            return Err((
                Some(entry.id),
                CmdError::err(format_args!(
                    "unknown subcommand '{}'. Try {} HELP.",
                    truncated(&args[1], 128),
                    entry.spec.name.to_ascii_uppercase()
                )),
            ));
        };
        arity_checked(sub).map(|()| sub)
    }
}

fn lowercase_into<'b>(name: &[u8], buf: &'b mut [u8; MAX_NAME]) -> Option<&'b [u8]> {
    if name.len() > MAX_NAME {
        return None;
    }
    for (d, s) in buf.iter_mut().zip(name) {
        *d = s.to_ascii_lowercase();
    }
    Some(&buf[..name.len()])
}

fn truncated(b: &[u8], max: usize) -> String {
    String::from_utf8_lossy(&b[..b.len().min(max)]).into_owned()
}

/// Redis's "unknown command" error, quoting the first arguments (at most ~128 bytes of them).
fn unknown_command(args: &Args) -> CmdError {
    let mut quoted = String::new();
    for a in &args[1..] {
        if quoted.len() >= 128 {
            break;
        }
        let room = 128 - quoted.len();
        quoted.push_str(&format!("'{}' ", truncated(a, room)));
    }
    CmdError::err(format_args!(
        "unknown command '{}', with args beginning with: {}",
        truncated(&args[0], 128),
        quoted
    ))
}

/// The command table, built on first use.
pub fn table() -> &'static CommandTable {
    static TABLE: OnceLock<CommandTable> = OnceLock::new();
    TABLE.get_or_init(|| {
        CommandTable::build(&[
            conn::COMMANDS,
            string::COMMANDS,
            list::COMMANDS,
            hash::COMMANDS,
            set::COMMANDS,
            zset::COMMANDS,
            keys::COMMANDS,
            admin::COMMANDS,
            client::COMMANDS,
            cluster::COMMANDS,
            multi::COMMANDS,
            migrate::COMMANDS,
        ])
    })
}

/// Runs one command and appends its reply to `out` (pool path, cache in [`Mode::Normal`]).
pub fn execute(server: &Server, session: &mut Session, out: &mut Reply, args: &Args) {
    execute_with(server, session, out, args, Mode::Normal, Duration::ZERO);
}

/// What [`execute_with`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The command ran (or was rejected) and its reply is in `out`.
    Done,
    /// [`Mode::CacheOnly`] only: the command is not rtc (or does not resolve). Nothing
    /// happened; run it in the pool.
    NotServed,
    /// [`Mode::CacheOnly`] only: the cache did not hold what the command reads. Nothing
    /// happened (no reply, no stats); run it in the pool with [`Mode::SkipCache`].
    Missed,
}

/// Runs one command in `mode` and appends its reply to `out`. `queue_wait` is the time it
/// waited before a worker picked it up (SLOWLOG shows it apart from execution).
///
/// The same function runs on a worker and (for cache hits) on an I/O thread, so every check the
/// pool path makes is made on both: resolution and arity, auth, keyspace hit/miss,
/// commandstats, errorstats, slowlog, expiry (the cache never serves an expired entry).
pub fn execute_with(
    server: &Server,
    session: &mut Session,
    out: &mut Reply,
    args: &Args,
    mode: Mode,
    queue_wait: Duration,
) -> Outcome {
    let start = Instant::now();
    let stats = &server.stats;
    let rtc = mode == Mode::CacheOnly;
    if rtc && session.multi.is_some() {
        return Outcome::NotServed; // queued (or rejected) by the pool path
    }
    let entry = match table().resolve(args) {
        Ok(e) if rtc && !e.rtc => return Outcome::NotServed,
        Ok(e) => e,
        Err(_) if rtc => return Outcome::NotServed,
        Err((id, e)) => {
            stats.record_rejected(id, &e);
            multi::reject(session, out, id, &e);
            return Outcome::Done;
        }
    };
    if !session.authenticated && !entry.spec.flags.contains(Flags::NO_AUTH) {
        let e = CmdError::noauth();
        stats.record_rejected(Some(entry.id), &e);
        multi::reject(session, out, Some(entry.id), &e);
        return Outcome::Done;
    }
    // Cluster routing; a command on a slot being migrated holds the slot's gate while it runs.
    let _cluster_gate = match server.cluster.node() {
        None => None,
        Some(node) => {
            use crate::cluster::routing::{check, Route};
            let now = crate::clock::unix_ms();
            match check(node, server, session, entry, args, rtc, now) {
                Route::Serve(gate) => gate,
                Route::NotServed => return Outcome::NotServed,
                Route::Reject(e) => {
                    stats.record_rejected(Some(entry.id), &e);
                    multi::reject(session, out, Some(entry.id), &e);
                    return Outcome::Done;
                }
            }
        }
    };
    if multi::intercept(server, session, out, entry, args) {
        return Outcome::Done;
    }
    run_entry(server, session, out, entry, args, mode, queue_wait, start)
}

/// The part of [`execute_with`] after resolution and the checks: runs `entry`'s handler and
/// accounts stats and slowlog. EXEC calls it for each queued command.
#[allow(clippy::too_many_arguments)]
pub(crate) fn run_entry(
    server: &Server,
    session: &mut Session,
    out: &mut Reply,
    entry: &Entry,
    args: &Args,
    mode: Mode,
    queue_wait: Duration,
    start: Instant,
) -> Outcome {
    let stats = &server.stats;
    let rtc = mode == Mode::CacheOnly;
    session.client.last_cmd.store(entry.id, Ordering::Relaxed);
    let mark = out.buf.len();
    let now_ms = crate::clock::unix_ms();
    let (result, deferred_hits) = {
        let mut ctx = Ctx {
            server,
            session,
            out,
            now_ms,
            mode,
            deferred_hits: Default::default(),
            args,
        };
        let r = if rtc {
            // A handler that reached for storage in CacheOnly mode panics (see Ctx::storage):
            // treat it as a miss rather than losing the I/O thread.
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                (entry.spec.handler)(&mut ctx, args)
            }))
            .unwrap_or_else(|_| Err(CmdError::cache_miss()))
        } else {
            (entry.spec.handler)(&mut ctx, args)
        };
        (r, ctx.deferred_hits.get())
    };
    if let Err(e) = &result {
        if e.is_cache_miss() {
            out.buf.truncate(mark);
            return Outcome::Missed;
        }
    }
    let elapsed = start.elapsed();
    if deferred_hits > 0 {
        stats
            .keyspace_hits
            .fetch_add(deferred_hits, Ordering::Relaxed);
    }
    if let Err(e) = &result {
        out.buf.truncate(mark);
        out.error(&e.0);
    }
    stats.record_call(entry.id, elapsed, result.as_ref().err());
    if rtc {
        stats.rtc_commands.fetch_add(1, Ordering::Relaxed);
    } else {
        stats.pool_commands.fetch_add(1, Ordering::Relaxed);
    }
    if !entry.spec.flags.contains(Flags::SKIP_SLOWLOG) {
        server
            .slowlog
            .maybe_record(server, session, args, elapsed, queue_wait);
    }
    Outcome::Done
}

#[cfg(test)]
mod tests {
    use super::spec::CacheEffect;
    use super::*;

    #[test]
    fn table_is_consistent() {
        let t = table();
        for e in t.entries.iter() {
            let s = e.spec;
            assert!(s.arity != 0, "{} has arity 0", e.full_name);
            assert_eq!(s.name, s.name.to_ascii_lowercase(), "{}", e.full_name);
            assert!(s.name.len() <= MAX_NAME);
            assert!(
                !(s.flags.contains(Flags::WRITE) && s.flags.contains(Flags::READONLY)),
                "{} is both write and readonly",
                e.full_name
            );
            if s.flags.contains(Flags::WRITE) {
                assert_ne!(
                    s.cache,
                    CacheEffect::None,
                    "write command {} must declare its cache effect",
                    e.full_name
                );
            }
            if s.keys.first > 0 {
                assert!(s.keys.step >= 1, "{}", e.full_name);
            }
            assert!(!s.summary.is_empty(), "{} has no summary", e.full_name);
        }
    }

    #[test]
    fn rtc_commands_only_read() {
        let t = table();
        for name in RTC {
            let e = t
                .lookup(name.as_bytes())
                .unwrap_or_else(|| panic!("{name} not in table"));
            assert!(e.rtc, "{name}");
            let s = e.spec;
            assert!(
                s.flags.contains(Flags::READONLY),
                "rtc command {name} must be readonly"
            );
            assert!(!s.flags.contains(Flags::WRITE | Flags::BLOCKING), "{name}");
            assert_eq!(
                s.cache,
                CacheEffect::None,
                "rtc command {name} changes the cache"
            );
            assert!(s.keys.first > 0, "rtc command {name} has no keys");
        }
        assert_eq!(t.entries.iter().filter(|e| e.rtc).count(), RTC.len());
    }

    #[test]
    fn lookup_is_case_insensitive_and_bounded() {
        let t = table();
        assert_eq!(t.lookup(b"GeT").unwrap().full_name, "get");
        assert!(t.lookup(b"nosuchcommand").is_none());
        assert!(t.lookup(&[b'a'; 100]).is_none());
    }

    #[test]
    fn unknown_command_error_matches_redis() {
        let args: Vec<bytes::Bytes> = vec!["foo".into(), "a".into(), "b".into()];
        assert_eq!(
            unknown_command(&args).0,
            "ERR unknown command 'foo', with args beginning with: 'a' 'b' "
        );
    }
}
