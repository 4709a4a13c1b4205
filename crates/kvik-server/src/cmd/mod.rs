//! The command table and the dispatcher.
//!
//! Each family module (`string`, `keys`, `conn`, `admin` ...) exports a `COMMANDS` slice of
//! [`CommandSpec`]s; [`table()`] joins them once into a [`CommandTable`] with a numeric id per
//! command and subcommand (the index of its statistics). Two entry points run one command:
//! [`execute`] on a worker, [`execute_cached`] on an I/O thread (only commands whose spec has a
//! run-to-completion handler, only from the hot cache). Both resolve the spec (unknown command,
//! subcommand, arity), check auth and cluster routing (`admit`), run the handler, render its
//! error and account stats and slowlog (`account`); the worker path also queues inside MULTI.

pub mod acl;
pub mod admin;
pub mod bitmap;
pub mod blocked;
pub mod cached;
pub mod client;
pub mod cluster;
pub mod collection;
pub mod conn;
pub mod ctx;
pub mod debug;
mod disk_gate;
pub mod hash;
pub mod hash_ttl;
pub mod hll;
mod isolation;
pub mod keys;
pub mod latency;
pub mod list;
pub mod memory;
pub mod migrate;
pub mod monitor;
pub mod multi;
pub mod pubsub;
mod ranked;
pub mod repl;
mod rtc_backoff;
pub mod run;
pub mod save;
pub mod script;
pub mod set;
pub mod sort;
pub mod spec;
pub mod stream;
pub mod string;
pub mod swapdb;
pub mod zset;

use crate::fast_hash::FastHash;
use crate::server::Server;
use crate::session::{ReplyMode, Session};
use blocked::Ready;
use cached::{CacheCtx, RtcError};
use ctx::{Args, CmdError, CmdResult, Ctx, ErrorKind, Mode, Reply};
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
    /// For containers: subcommand name -> entry id.
    subs: HashMap<&'static str, usize, FastHash>,
}

#[derive(Debug)]
pub struct CommandTable {
    entries: Vec<Entry>,
    top: HashMap<&'static str, usize, FastHash>,
}

/// Longest command or subcommand name that can exist; longer names are unknown without lookup.
const MAX_NAME: usize = 32;

thread_local! {
    /// This thread's last top-level lookup: the table's address and the entry found there
    /// (only ever an id from that table's `top`, so a hit is a top-level command).
    static LAST_LOOKUP: std::cell::Cell<(usize, usize)> = const { std::cell::Cell::new((0, 0)) };
}

impl CommandTable {
    fn build(families: &[&'static [CommandSpec]]) -> CommandTable {
        let mut table = CommandTable {
            entries: Vec::new(),
            top: HashMap::default(),
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
        self.entries.push(Entry {
            spec,
            full_name,
            id,
            subs: HashMap::default(),
        });
        id
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Every entry's full name, in table order (the index of its statistics).
    pub fn names(&self) -> Vec<String> {
        self.entries.iter().map(|e| e.full_name.clone()).collect()
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
    ///
    /// The thread's last answer is tried first ([`LAST_LOOKUP`]): a pipeline mostly repeats one
    /// command, and an I/O thread looks each one up twice (to prefetch its keys, then to run
    /// it); the hashed lookup was ~4.5% of a cached GET -P 16's server CPU.
    pub fn lookup(&self, name: &[u8]) -> Option<&Entry> {
        let me = self as *const CommandTable as usize;
        let (table, id) = LAST_LOOKUP.get();
        // A table built where a dropped one was (tests) may hold anything at `id`: only a
        // top-level entry (its full name is its spec's name) of the same name is an answer.
        if let Some(last) = self.entries.get(id).filter(|_| table == me) {
            if last.full_name.len() == last.spec.name.len()
                && name.eq_ignore_ascii_case(last.full_name.as_bytes())
            {
                return Some(last);
            }
        }
        let mut buf = [0u8; MAX_NAME];
        let lower = lowercase_into(name, &mut buf)?;
        let id = *self.top.get(std::str::from_utf8(lower).ok()?)?;
        LAST_LOOKUP.set((me, id));
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
            hash_ttl::COMMANDS,
            set::COMMANDS,
            zset::COMMANDS,
            stream::COMMANDS,
            keys::COMMANDS,
            admin::COMMANDS,
            client::COMMANDS,
            cluster::COMMANDS,
            multi::COMMANDS,
            migrate::COMMANDS,
            pubsub::COMMANDS,
            script::COMMANDS,
            sort::COMMANDS,
            bitmap::COMMANDS,
            hll::COMMANDS,
            zset::GEO_COMMANDS,
            repl::COMMANDS,
            acl::COMMANDS,
            swapdb::COMMANDS,
            save::COMMANDS,
            monitor::COMMANDS,
            debug::COMMANDS,
            memory::COMMANDS,
            latency::COMMANDS,
        ])
    })
}

/// The slow lane over this table: any command may go to it but those Redis flags `fast` (GET,
/// HGET, SET ...), whose long runs are waits for a slow disk, which the workers wait out side
/// by side and one lane thread would put in a row.
pub fn slow_lane() -> crate::pool::slow_lane::SlowLane {
    let t = table();
    crate::pool::slow_lane::SlowLane::new(
        (0..t.len()).map(|id| !t.entry(id).spec.flags.contains(Flags::FAST)),
    )
}

/// A write command on a read-only replica (`replica-read-only yes`).
pub(crate) const READONLY_REPLICA: CmdError = CmdError::new(
    crate::error::ErrorKind::ReadOnly,
    "You can't write against a read only replica.",
);

/// A write on a primary with fewer good replicas than `min-replicas-to-write`.
pub(crate) const NO_GOOD_REPLICAS: CmdError = CmdError::new(
    crate::error::ErrorKind::NoReplicas,
    "Not enough good replicas to write.",
);

/// The reply of a command that panicked (the connection lives on).
pub(crate) const INTERNAL_ERROR: CmdError =
    CmdError::fixed("internal error while running the command");

/// What [`execute_cached`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The command ran (or was rejected) and its reply is in `out`.
    Done,
    /// The command is not run-to-completion here (not rtc, unknown, inside MULTI, a routing
    /// decision that needs storage). Nothing happened; run it in the pool.
    NotServed,
    /// The cache did not hold what the command reads. Nothing happened (no reply, no stats);
    /// run it in the pool with [`Mode::SkipCache`].
    Missed,
    /// Another thread holds one of its keys (another I/O thread's turn, a worker's command).
    /// Nothing happened; try it again on a later turn (`rtc-lock-retries`), else in the pool.
    Contended,
}

/// Runs one command on a worker and appends its reply to `out`. `mode` is [`Mode::SkipCache`]
/// for a command that just missed the cache on the I/O thread; `queue_wait` is the time it
/// waited before a worker picked it up (SLOWLOG shows it apart from execution). Returns the
/// keys its writes made ready for blocked clients, to [`blocked::serve`] before the
/// connection's next command.
pub fn execute(
    server: &Server,
    session: &mut Session,
    out: &mut Reply,
    args: &Args,
    mode: Mode,
    queue_wait: Duration,
) -> Ready {
    let (mark, was) = (out.buf.len(), session.reply_mode);
    session.paused = None;
    let ready = execute_checked(server, session, out, args, mode, queue_wait);
    if session.paused.is_none() {
        gate_reply(session, out, mark, was);
    }
    publish_state(session);
    ready
}

/// Whether the session's held command (see [`crate::pause`]) must still wait; clears the mark
/// once the pause is over.
pub fn still_paused(server: &Server, session: &mut Session) -> bool {
    match session.paused {
        Some(may_write) if server.pause.holds(may_write) => true,
        _ => {
            session.paused = None;
            false
        }
    }
}

/// [`execute`] without its reply gate and state publishing.
fn execute_checked(
    server: &Server,
    session: &mut Session,
    out: &mut Reply,
    args: &Args,
    mode: Mode,
    queue_wait: Duration,
) -> Ready {
    let start = Instant::now();
    let entry = match table().resolve(args) {
        Ok(e) => e,
        Err((id, e)) => {
            reject(server, session, out, id, &e);
            return Ready::default();
        }
    };
    let Admit::Run(_cluster_gate) = admit(server, session, out, entry, args, false) else {
        return Ready::default();
    };
    if in_subscribe_context(session) && !entry.spec.in_subscribe {
        let e = CmdError::err(format_args!(
            "Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context",
            entry.full_name
        ));
        reject(server, session, out, Some(entry.id), &e);
        return Ready::default();
    }
    if let Some(e) = script::busy_refusal(server, entry) {
        reject(server, session, out, Some(entry.id), &e);
        return Ready::default();
    }
    let may_write = pause_class(session, entry);
    if server.pause.holds(may_write) {
        session.paused = Some(may_write); // not run: the run comes back with it first
        return Ready::default();
    }
    if !multi::intercept(server, session, out, entry, args) {
        let db = Ctx::physical_db(server, session);
        let unlocked = isolation::RtcRead::begin_on_worker(server, db, entry, args);
        let ran = unlocked.is_some_and(|check| {
            let check = Some(check);
            run_entry(
                server, session, out, entry, args, mode, queue_wait, start, check,
            )
        });
        if !ran {
            let _reading = isolation::lock_read_keys(server, db, entry, args);
            run_entry(
                server, session, out, entry, args, mode, queue_wait, start, None,
            );
        }
    }
    Ready::collect()
}

/// Runs one command on an I/O thread if its spec has a run-to-completion handler and the hot
/// cache holds its keys, appending its reply to `out`. It makes every check the worker path
/// makes (resolution, arity, auth, cluster routing) and the same accounting (keyspace hits,
/// commandstats, errorstats, slowlog); the cache never serves an expired entry.
pub fn execute_cached(
    server: &Server,
    session: &mut Session,
    out: &mut Reply,
    args: &Args,
) -> Outcome {
    let start = session.command_start();
    if session.multi.is_some() || in_subscribe_context(session) {
        return Outcome::NotServed; // queued (or rejected) by the worker path
    }
    let Ok(entry) = table().resolve(args) else {
        return Outcome::NotServed;
    };
    if server.pause.holds(pause_class(session, entry)) {
        return Outcome::NotServed; // the worker path holds it (see `crate::pause`)
    }
    let (mark, was) = (out.buf.len(), session.reply_mode);
    let outcome = execute_cached_entry(server, session, out, args, entry, start);
    if outcome == Outcome::Done {
        gate_reply(session, out, mark, was);
    }
    outcome
}

/// The database and first key of a command, from its spec: what an I/O thread that found the
/// command's key held by another thread asks which thread the key belongs to (`io-key-affinity`).
pub fn first_key<'a>(
    server: &Server,
    session: &Session,
    args: &'a Args,
) -> Option<(u16, &'a [u8])> {
    let entry = table().lookup(&args[0])?;
    let at = *entry.spec.key_positions(args).first()?;
    let key = args.get(at)?;
    Some((Ctx::physical_db(server, session), &key[..]))
}

/// Before an I/O thread runs a `run` (pipelined commands, or one with many keys) with
/// [`execute_cached`]: asks the CPU for the hot-cache lines the keys of its first cached reads
/// and writes will look up, all at once ([`crate::cache::Cache::prefetch`], `cache-prefetch`).
/// Returns how many commands that covered (see [`prefetch_window`]); the caller prefetches the
/// next ones when it reaches them.
pub fn prefetch_run(server: &Server, session: &Session, run: &[Vec<bytes::Bytes>]) -> usize {
    if !server.config.cache_prefetch.load(Ordering::Relaxed) {
        return run.len();
    }
    let mut keys = smallvec::SmallVec::new();
    let covered = prefetch_window(session.db, run, &mut keys);
    // One key alone has nothing to overlap with.
    if keys.len() > 1 {
        server.storage.cache().prefetch(&keys);
    }
    covered
}

/// The keys (and a hash read's fields) the first commands of `run` will look up in the hot
/// cache, as many commands as fit [`crate::cache::PREFETCH_KEYS`] keys (at least one), and
/// how many commands that is. From each command's spec: the commands the cache answers or
/// writes on the I/O thread, by their key positions and `fields`; any other command (or one
/// that moves its keys) adds none.
fn prefetch_window<'a>(
    db: u16,
    run: &'a [Vec<bytes::Bytes>],
    keys: &mut smallvec::SmallVec<[crate::cache::Prefetch<'a>; crate::cache::PREFETCH_KEYS]>,
) -> usize {
    let mut covered = 0;
    for args in run {
        let spec = match table().lookup(&args[0]) {
            Some(entry) if entry.spec.keys_fn.is_none() => Some(&entry.spec),
            _ => None,
        }
        .filter(|spec| spec.rtc.is_some() || spec.rtc_write);
        if let Some(spec) = spec {
            let n = spec.keys.positions(args.len()).count();
            if covered > 0 && keys.len() + n > crate::cache::PREFETCH_KEYS {
                break;
            }
            let fields = match spec.fields.at {
                0 => &[][..],
                at => args.get(usize::from(at)..).unwrap_or_default(),
            };
            let field_step = usize::from(spec.fields.step);
            keys.extend(
                spec.keys
                    .positions(args.len())
                    .map(|i| crate::cache::Prefetch {
                        db,
                        key: &args[i],
                        value: spec.rtc.is_some(),
                        fields,
                        field_step,
                    }),
            );
        }
        covered += 1;
    }
    covered
}

/// [`execute_cached`] once the entry is resolved.
fn execute_cached_entry(
    server: &Server,
    session: &mut Session,
    out: &mut Reply,
    args: &Args,
    entry: &Entry,
    start: Instant,
) -> Outcome {
    // While scripts run, SCRIPT KILL, FUNCTION KILL and BUSY refusals are answered here, so
    // they need no worker (scripts may hold them all).
    let for_scripts = script::on_io_thread(server, entry).or_else(|| client::on_io_thread(entry));
    let read = entry.spec.rtc.filter(|_| {
        server.config.rtc_read.load(Ordering::Relaxed) && server.storage.cache().enabled()
    });
    // A write, or a read the hot cache cannot answer, run by its worker handler right here.
    let here = entry.spec.io_thread
        || ((entry.spec.rtc_write || entry.spec.rtc_nowait_read)
            && server.config.rtc_write.load(Ordering::Relaxed))
        || (entry.spec.rtc_script && server.config.rtc_scripts.load(Ordering::Relaxed));
    if read.is_none() && !here && for_scripts.is_none() {
        return Outcome::NotServed;
    }
    let _cluster_gate = match admit(server, session, out, entry, args, true) {
        Admit::Run(gate) => gate,
        Admit::Rejected => return Outcome::Done,
        Admit::NotServed => return Outcome::NotServed,
    };
    match for_scripts {
        Some(script::IoServe::Busy(e)) => {
            reject(server, session, out, Some(entry.id), &e);
            return Outcome::Done;
        }
        Some(script::IoServe::Run(run)) => {
            let mark = out.buf.len();
            let result = run(server, out);
            shown_and_accounted(server, session, out, entry, args, mark, result, start);
            return Outcome::Done;
        }
        None => {}
    }
    if entry.spec.io_thread {
        return run_keyless(server, session, out, entry, args, start);
    }
    let Some(handler) = read else {
        if !here {
            return Outcome::NotServed;
        }
        return run_here(server, session, out, entry, args, start, Outcome::NotServed);
    };
    let db = Ctx::physical_db(server, session);
    let Some(check) = isolation::RtcRead::begin(server, db, entry, args) else {
        return Outcome::Contended; // a write of its keys is in progress
    };
    track_reads(server, session, entry, args);
    let mark = out.buf.len();
    let mut ctx = CacheCtx::new(server, session, out, crate::clock::unix_ms_at(start));
    let result = handler(&mut ctx, args);
    let lookups = ctx.into_lookups();
    if !check.still_whole(server) {
        out.buf.truncate(mark);
        return Outcome::Contended;
    }
    session.client.last_cmd.store(entry.id, Ordering::Relaxed);
    let result = match result {
        Ok(()) => Ok(()),
        Err(RtcError::Reply(e)) => Err(e),
        Err(RtcError::Miss) => {
            out.buf.truncate(mark);
            if here
                || (entry.spec.rtc_storage
                    && server.config.rtc_storage_read.load(Ordering::Relaxed))
            {
                return run_here(server, session, out, entry, args, start, Outcome::Missed);
            }
            return Outcome::Missed;
        }
    };
    lookups.publish(&server.stats);
    served_here(server, session, out, entry, args, mark, result, start)
}

/// Runs `entry`'s worker handler on the I/O thread in [`Mode::NoWait`]: a run-to-completion
/// write (`CommandSpec::rtc_write`), a read the hot cache cannot answer
/// (`CommandSpec::rtc_nowait_read`), or a read that missed the hot cache
/// (`CommandSpec::rtc_storage`). Reads check their keys' write epochs instead of taking their locks
/// ([`isolation::RtcRead::begin_stored`]), so both I/O threads read one hot key at once; a
/// script takes its declared keys' locks, tried. If it would
/// wait it has changed nothing: its half-written reply is dropped and the pool runs it
/// (`would_block` says how). A write's reply leaves once the I/O thread made its writes
/// durable (the I/O thread's end of turn, `Storage::make_durable`).
fn run_here(
    server: &Server,
    session: &mut Session,
    out: &mut Reply,
    entry: &Entry,
    args: &Args,
    start: Instant,
    would_block: Outcome,
) -> Outcome {
    let backoff = server.config.rtc_backoff.load(Ordering::Relaxed);
    if backoff && !rtc_backoff::should_try(entry.id) {
        server
            .stats
            .rtc_backoff_skips
            .fetch_add(1, Ordering::Relaxed);
        return would_block;
    }
    // `contended`: another thread holds one of its keys (tried again on a later turn).
    let fall_back = |server: &Server, contended: bool| {
        server.stats.rtc_fallbacks.fetch_add(1, Ordering::Relaxed);
        if backoff {
            rtc_backoff::record(entry.id, true);
        }
        if contended {
            Outcome::Contended
        } else {
            would_block
        }
    };
    let db = Ctx::physical_db(server, session);
    let (_reading, check) = if entry.spec.rtc_nowait_read || entry.spec.rtc_storage {
        let Some(check) = isolation::RtcRead::begin_stored(server, db, entry, args) else {
            return fall_back(server, true); // a writer holds one of its keys
        };
        (None, Some(check))
    } else {
        let Ok(reading) = isolation::try_lock_read_keys(server, db, entry, args) else {
            return fall_back(server, true);
        };
        (reading, None)
    };
    let disk_reads = server.config.rtc_disk_read.load(Ordering::Relaxed) && disk_gate::open();
    let mark = out.buf.len();
    let mode = Mode::NoWait {
        disk_reads,
        cache_asked: would_block == Outcome::Missed,
    };
    let result = call_handler(server, session, out, entry, args, mode, check, start);
    if disk_reads {
        let slow = server.config.rtc_disk_read_slow_us.load(Ordering::Relaxed);
        if disk_gate::record(start.elapsed(), Duration::from_micros(slow)) {
            server
                .stats
                .rtc_disk_gate_closes
                .fetch_add(1, Ordering::Relaxed);
        }
    }
    if let Err(e) = &result {
        if e.kind.waits() {
            out.buf.truncate(mark);
            return fall_back(server, e.kind == ErrorKind::KeyBusy);
        }
    }
    if backoff {
        rtc_backoff::record(entry.id, false);
    }
    debug_assert!(
        Ready::collect().is_empty(),
        "{} made keys ready on an I/O thread",
        entry.full_name
    );
    session.client.last_cmd.store(entry.id, Ordering::Relaxed);
    served_here(server, session, out, entry, args, mark, result, start)
}

/// Runs a command that touches no key (`CommandSpec::io_thread`: PING, HELLO, CLIENT SETINFO,
/// INFO ...) on the I/O thread as a worker would run it ([`run_entry`]): it never waits, so it
/// is noted and shown to MONITOR before it runs (CLIENT LIST shows `cmd=client|list`, MONITOR
/// shows SELECT in the database it was sent from). Not counted in `rtc_commands`, which INFO
/// reports (INFO would count itself).
fn run_keyless(
    server: &Server,
    session: &mut Session,
    out: &mut Reply,
    entry: &Entry,
    args: &Args,
    start: Instant,
) -> Outcome {
    session.client.last_cmd.store(entry.id, Ordering::Relaxed);
    monitor::feed(server, session, entry, args);
    let mark = out.buf.len();
    let mode = Mode::NoWait {
        disk_reads: false,
        cache_asked: false,
    };
    let result = call_handler(server, session, out, entry, args, mode, None, start);
    if matches!(&result, Err(e) if e.kind.waits()) {
        debug_assert!(false, "{} would wait on an I/O thread", entry.full_name);
        out.buf.truncate(mark);
        return Outcome::NotServed;
    }
    accounted_here(server, session, out, entry, args, mark, result, start);
    Outcome::Done
}

/// The end of a command answered on the I/O thread (a cached read or a run-to-completion
/// write): counted as run to completion, shown to MONITOR, accounted as on a worker.
#[allow(clippy::too_many_arguments)]
fn served_here(
    server: &Server,
    session: &mut Session,
    out: &mut Reply,
    entry: &Entry,
    args: &Args,
    mark: usize,
    result: CmdResult,
    start: Instant,
) -> Outcome {
    server.stats.rtc_commands.fetch_add(1, Ordering::Relaxed);
    shown_and_accounted(server, session, out, entry, args, mark, result, start);
    Outcome::Done
}

/// The end of a command run on an I/O thread (on its own, or inside a script there): shown to
/// MONITOR, accounted as on a worker (no queue wait).
#[allow(clippy::too_many_arguments)]
fn shown_and_accounted(
    server: &Server,
    session: &mut Session,
    out: &mut Reply,
    entry: &Entry,
    args: &Args,
    mark: usize,
    result: CmdResult,
    start: Instant,
) {
    monitor::feed(server, session, entry, args);
    accounted_here(server, session, out, entry, args, mark, result, start);
}

/// Accounts a command run on an I/O thread as on a worker, with no queue wait.
#[allow(clippy::too_many_arguments)]
fn accounted_here(
    server: &Server,
    session: &mut Session,
    out: &mut Reply,
    entry: &Entry,
    args: &Args,
    mark: usize,
    result: CmdResult,
    start: Instant,
) {
    account(
        server,
        session,
        out,
        entry,
        args,
        mark,
        result,
        start,
        Duration::ZERO,
    );
}

/// A RESP2 client with subscriptions may only run the commands marked `in_subscribe`
/// (RESP3 clients get pushes and may run anything).
fn in_subscribe_context(session: &Session) -> bool {
    session.proto == kvik_resp::Proto::Resp2 && session.subs.any()
}

/// What [`admit`] decided.
enum Admit<'s> {
    /// Run the command, holding its cluster slot gate (if any) until it is done.
    Run(Option<crate::cluster::Gate<'s>>),
    /// Rejected (NOAUTH, MOVED ...): the error is in the reply.
    Rejected,
    /// Run-to-completion only: routing needs storage; let the pool decide (nothing changed).
    NotServed,
}

/// The checks between resolution and running: auth, then cluster routing (with the spec's
/// routing rule and key positions); a command on a slot being migrated holds the slot's gate
/// while it runs.
fn admit<'s>(
    server: &'s Server,
    session: &mut Session,
    out: &mut Reply,
    entry: &Entry,
    args: &Args,
    rtc: bool,
) -> Admit<'s> {
    if !session.authenticated && !entry.spec.flags.contains(Flags::NO_AUTH) {
        reject(server, session, out, Some(entry.id), &CmdError::noauth());
        return Admit::Rejected;
    }
    let context = crate::acl::Context::Toplevel;
    if let Err(e) = crate::acl::admit(server, session, entry, args, context) {
        reject(server, session, out, Some(entry.id), &e);
        return Admit::Rejected;
    }
    if entry.spec.flags.contains(Flags::PROTECTED) && !debug::allowed(server, session) {
        reject(server, session, out, Some(entry.id), &debug::NOT_ALLOWED);
        return Admit::Rejected;
    }
    if entry.spec.flags.contains(Flags::WRITE) {
        // FAILOVER paused writes: a worker waits; the I/O thread hands the write to one.
        if rtc && server.repl.failover.writes_paused() {
            return Admit::NotServed;
        }
        server.repl.failover.wait_if_paused();
    }
    let Some(node) = server.cluster.node() else {
        return refuse_replica_write(server, session, out, entry, None);
    };
    use crate::cluster::routing::{check, Request, Route};
    let positions = entry.spec.key_positions(args);
    let req = Request {
        routing: entry.spec.routing,
        positions: &positions,
        args,
        rtc,
        write: entry.spec.flags.contains(Flags::WRITE),
        now_ms: crate::clock::unix_ms(),
    };
    let settings = &server.config.cluster;
    // Routing first: a replica in cluster mode answers MOVED to its primary for a write.
    match check(node, settings, &server.storage, session, &req) {
        Route::Serve(gate) => refuse_replica_write(server, session, out, entry, gate),
        Route::NotServed => Admit::NotServed,
        Route::Reject(e) => {
            reject(server, session, out, Some(entry.id), &e);
            Admit::Rejected
        }
    }
}

/// Whether the command writes, as Redis's checks before running (min-replicas-to-write, a
/// read-only replica) see it: a write command, or EXEC of a transaction that queued one.
fn writes(session: &Session, entry: &Entry) -> bool {
    if entry.spec.flags.contains(Flags::WRITE) {
        return true;
    }
    entry.spec.in_multi == spec::InMulti::Exec
        && session.multi.as_ref().is_some_and(|m| {
            m.queue
                .iter()
                .any(|q| table().entry(q.id).spec.flags.contains(Flags::WRITE))
        })
}

/// After routing (Redis answers MOVED first): a write, or EXEC of one, gets MISCONF while the
/// disk cannot take it ([`disk_refusal`]), on a primary whose write
/// lease lapsed gets CLUSTERDOWN (`replication::lease`), on a primary without
/// enough good replicas (`min-replicas-to-write`) gets NOREPLICAS, and on a read-only replica
/// READONLY; anything else runs (holding `gate`).
fn refuse_replica_write<'s>(
    server: &'s Server,
    session: &mut Session,
    out: &mut Reply,
    entry: &Entry,
    gate: Option<crate::cluster::Gate<'s>>,
) -> Admit<'s> {
    if let Some(e) = disk_refusal(server, session, entry) {
        reject(server, session, out, Some(entry.id), &e);
        return Admit::Rejected;
    }
    if writes(session, entry) {
        if let Err(e) = crate::replication::lease::check(server) {
            reject(server, session, out, Some(entry.id), &e);
            return Admit::Rejected;
        }
        if !server.repl.enough_good_replicas(&server.config.repl) {
            reject(server, session, out, Some(entry.id), &NO_GOOD_REPLICAS);
            return Admit::Rejected;
        }
        if server.config.repl.read_only.load(Ordering::Relaxed) && server.repl.is_replica() {
            reject(server, session, out, Some(entry.id), &READONLY_REPLICA);
            return Admit::Rejected;
        }
    }
    Admit::Run(gate)
}

/// Redis's MISCONF: while the disk cannot take writes (`storage::health`), a write, EXEC of
/// one, and PING (so that health checks notice, as Redis's do) are refused; reads go on.
fn disk_refusal(server: &Server, session: &Session, entry: &Entry) -> Option<CmdError> {
    let health = server.storage.health();
    if health.ok() || !(entry.spec.name == "ping" || writes(session, entry)) {
        return None;
    }
    let why = health.refuse()?;
    Some(CmdError::with(crate::error::ErrorKind::MisConf, why))
}

/// Answers a command rejected before it ran (unknown, arity, auth, routing), as Redis's
/// `rejectCommand`, and counts it.
fn reject(
    server: &Server,
    session: &mut Session,
    out: &mut Reply,
    id: Option<usize>,
    e: &CmdError,
) {
    server.stats.record_rejected(id, e);
    multi::reject(session, out, id, e);
}

/// The part of [`execute`] after resolution and the checks: runs `entry`'s handler and
/// accounts stats and slowlog. EXEC calls it for each queued command. A read run without its
/// keys' locks brings its `check` ([`isolation::RtcRead::begin_on_worker`]): if a write of its
/// keys began or ended while it read, nothing of it is shown, answered or accounted, and it
/// returns false (it runs again under the locks).
#[allow(clippy::too_many_arguments)]
pub(in crate::cmd) fn run_entry(
    server: &Server,
    session: &mut Session,
    out: &mut Reply,
    entry: &Entry,
    args: &Args,
    mode: Mode,
    queue_wait: Duration,
    start: Instant,
    check: Option<isolation::RtcRead>,
) -> bool {
    session.client.last_cmd.store(entry.id, Ordering::Relaxed);
    let unlocked = check.is_some();
    // As Redis, EXEC shows after the commands it ran; an unlocked read once it is whole.
    let shown_after = entry.spec.in_multi == spec::InMulti::Exec || unlocked;
    if !shown_after {
        monitor::feed(server, session, entry, args);
    }
    let mark = out.buf.len();
    let result = call_handler(server, session, out, entry, args, mode, check, start);
    if unlocked && matches!(&result, Err(e) if e.kind == ErrorKind::KeyBusy) {
        out.buf.truncate(mark);
        let retries = &server.stats.pool_read_retries;
        retries.fetch_add(1, Ordering::Relaxed);
        return false;
    }
    if shown_after {
        monitor::feed(server, session, entry, args);
    }
    server.stats.pool_commands.fetch_add(1, Ordering::Relaxed);
    if unlocked {
        let reads = &server.stats.pool_unlocked_reads;
        reads.fetch_add(1, Ordering::Relaxed);
    }
    account(
        server, session, out, entry, args, mark, result, start, queue_wait,
    );
    true
}

/// [`run_entry`] for a command of a script that an I/O thread runs: in [`Mode::NoWait`];
/// `false` if it would wait, then nothing of it was run or accounted (the script gives up and
/// the pool runs it from the start).
pub(crate) fn try_run_entry(
    server: &Server,
    session: &mut Session,
    out: &mut Reply,
    entry: &Entry,
    args: &Args,
    disk_reads: bool,
) -> bool {
    let start = Instant::now();
    let mark = out.buf.len();
    let mode = Mode::NoWait {
        disk_reads,
        cache_asked: false,
    };
    let result = call_handler(server, session, out, entry, args, mode, None, start);
    if matches!(&result, Err(e) if e.kind.waits()) {
        out.buf.truncate(mark);
        return false;
    }
    session.client.last_cmd.store(entry.id, Ordering::Relaxed);
    shown_and_accounted(server, session, out, entry, args, mark, result, start);
    true
}

/// Runs `entry`'s worker handler with a fresh [`Ctx`] in `mode`, on the on-disk database that
/// holds the session's selected one (see `storage::dbmap`), with the client noted for
/// tracking (NOLOOP) and its read keys remembered: the one place both the pool
/// ([`run_entry`]) and the I/O thread ([`run_here`]) call a handler. A read run without its
/// keys' locks (on either) brings its `check`: if a write of its keys began or ended while it
/// read, it ends with KeyBusy (and runs again: on a worker, under the locks). `start` is the command's clock reading:
/// its time for expiry too (see `clock::unix_ms_at`).
#[allow(clippy::too_many_arguments)]
fn call_handler(
    server: &Server,
    session: &mut Session,
    out: &mut Reply,
    entry: &Entry,
    args: &Args,
    mode: Mode,
    check: Option<isolation::RtcRead>,
    start: Instant,
) -> CmdResult {
    crate::tracking::set_current(session.id());
    track_reads(server, session, entry, args);
    let db = Ctx::physical_db(server, session);
    let mut ctx = Ctx {
        server,
        session,
        out,
        now_ms: crate::clock::unix_ms_at(start),
        mode,
        args,
        blocked_again: false,
        db,
        deferred_lookups: Default::default(),
    };
    let mut result = (entry.spec.handler)(&mut ctx, args);
    if check.is_some_and(|c| !c.still_whole(server)) {
        result = Err(CmdError::KEY_BUSY);
    }
    if !matches!(&result, Err(e) if e.kind.waits()) {
        ctx.deferred_lookups.publish(&server.stats);
    }
    result
}

/// After a command ran, on either path: its error reply replaces anything it half-wrote
/// (from `mark`), and its call, error and slowlog entry are recorded.
#[allow(clippy::too_many_arguments)]
fn account(
    server: &Server,
    session: &mut Session,
    out: &mut Reply,
    entry: &Entry,
    args: &Args,
    mark: usize,
    result: CmdResult,
    start: Instant,
    queue_wait: Duration,
) {
    let end = Instant::now();
    let elapsed = end.saturating_duration_since(start);
    session.command_end(end);
    if let Err(e) = &result {
        out.buf.truncate(mark);
        out.error(e);
    }
    server
        .stats
        .record_call(entry.id, elapsed, result.as_ref().err());
    server.slow_lane.observe(entry.id, elapsed);
    server
        .latency
        .record_command(entry.id, elapsed, entry.spec.flags.contains(Flags::FAST));
    if !entry.spec.flags.contains(Flags::SKIP_SLOWLOG) {
        server
            .slowlog
            .maybe_record(&server.config, session, args, elapsed, queue_wait);
    }
    // CLIENT CACHING lasts one command (or one transaction, or one script); CLIENT commands
    // keep it.
    if let Some(t) = session.tracking.as_mut() {
        if t.caching
            && session.multi.is_none()
            && !session.in_exec
            && !session.in_script
            && !entry.full_name.starts_with("client|")
        {
            t.caching = false;
        }
    }
}

/// CLIENT TRACKING: remembers the keys a read-only command is about to read, for the session's
/// invalidations (before it reads, so a write that races the read is still reported).
/// Read-only script commands are not remembered themselves, only what their scripts read.
fn track_reads(server: &Server, session: &Session, entry: &Entry, args: &Args) {
    let Some(t) = &session.tracking else {
        return;
    };
    if !entry.spec.flags.contains(Flags::READONLY)
        || matches!(entry.spec.name, "eval_ro" | "evalsha_ro" | "fcall_ro")
        || !t.remembers()
    {
        return;
    }
    let positions = entry.spec.key_positions(args);
    server
        .tracking
        .remember(session.id(), positions.iter().map(|&i| &args[i][..]));
}

/// Whether CLIENT PAUSE WRITE holds this command: a write or a command that may replicate
/// (PUBLISH, scripts with writes ...), or an EXEC whose queue holds one, as Redis decides.
fn pause_class(session: &Session, entry: &Entry) -> bool {
    let writes = |f: Flags| f.intersects(Flags::WRITE | Flags::MAY_REPLICATE);
    writes(entry.spec.flags)
        || (entry.spec.in_multi == spec::InMulti::Exec
            && session.multi.as_ref().is_some_and(|m| {
                m.queue
                    .iter()
                    .any(|q| writes(table().entry(q.id).spec.flags))
            }))
}

/// CLIENT REPLY OFF / SKIP: drops the reply this command wrote (from `mark`); `was` is the mode
/// before it ran. Pushes (pub/sub, invalidations) go through the mailbox and are never dropped.
fn gate_reply(session: &mut Session, out: &mut Reply, mark: usize, was: ReplyMode) {
    let now = session.reply_mode;
    let drop = was == ReplyMode::Skipping || matches!(now, ReplyMode::Off | ReplyMode::SkipNext);
    session.reply_mode = match now {
        ReplyMode::SkipNext => ReplyMode::Skipping,
        ReplyMode::Skipping => ReplyMode::On,
        m => m,
    };
    if drop {
        out.buf.truncate(mark);
    }
}

/// Publishes what CLIENT LIST shows of the session (`multi=`, `watch=`, flag `x`).
fn publish_state(session: &Session) {
    let state = &session.client.state;
    let multi = session.multi.as_ref().map_or(-1, |m| m.len() as i64);
    state.multi.store(multi, Ordering::Relaxed);
    state.watch.store(session.watches.len(), Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::spec::{CacheEffect, KeySpec};
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

    /// What the name lists beside the table used to guarantee, now read from the specs.
    #[test]
    fn spec_execution_fields_are_consistent() {
        use super::spec::{InMulti, Routing};
        let t = table();
        let mut rtc = 0;
        for e in t.entries.iter() {
            let (s, name) = (e.spec, &e.full_name);
            // Fields to prefetch: a hash command of one key on the I/O thread, its fields
            // after the key.
            if s.fields != super::spec::FieldArgs::NONE {
                assert!(
                    s.rtc.is_some() || s.rtc_write,
                    "{name}: fields, not on the I/O thread"
                );
                assert_eq!(s.group, "hash", "{name}");
                assert_eq!(s.keys, super::spec::KeySpec::ONE, "{name}");
                assert!(s.fields.at == 2 && s.fields.step > 0, "{name}");
            }
            if s.rtc.is_some() {
                rtc += 1;
                // Answered on an I/O thread from the cache: reads only, cheap, keys known.
                // The exceptions touch no key, only shared in-memory state: PUBLISH (the
                // pub/sub registry) and CLUSTER SLOTS / SHARDS / NODES (the rendered topology).
                let topology = ["cluster|slots", "cluster|shards", "cluster|nodes"];
                let shared_state =
                    s.flags.contains(Flags::PUBSUB) || topology.contains(&name.as_str());
                assert!(
                    s.flags.contains(Flags::READONLY) || shared_state,
                    "rtc {name} must be readonly"
                );
                assert!(
                    !s.flags.intersects(Flags::WRITE | Flags::BLOCKING),
                    "{name}"
                );
                assert!(
                    !s.flags.contains(Flags::MOVABLE_KEYS),
                    "rtc {name}: movable keys"
                );
                assert_eq!(s.cache, CacheEffect::None, "rtc {name} changes the cache");
                assert!(s.keys.first > 0 || shared_state, "rtc {name} has no keys");
                assert_eq!(s.in_multi, InMulti::Queued, "rtc {name}");
                assert_eq!(s.routing, Routing::Keys, "rtc {name}");
                assert!(s.subcommands.is_empty(), "rtc {name} is a container");
            }
            if s.in_multi != InMulti::Queued {
                // Run at once inside MULTI: connection and transaction control only.
                assert!(
                    !s.flags.contains(Flags::WRITE),
                    "{name} runs at once in MULTI"
                );
                assert!(!s.flags.contains(Flags::NO_MULTI), "{name}");
            }
            if s.routing != Routing::Keys {
                assert!(s.rtc.is_none(), "{name}");
            }
            if matches!(s.routing, Routing::Asking | Routing::DbZeroOnly) {
                assert_eq!(s.keys, KeySpec::NONE, "{name} routes without keys");
            }
        }
        assert!(rtc > 0);
        for name in ["get", "mget", "hget", "ttl"] {
            assert!(
                t.lookup(name.as_bytes()).unwrap().spec.rtc.is_some(),
                "{name}"
            );
        }
        let exec: Vec<_> = t
            .entries
            .iter()
            .filter(|e| e.spec.in_multi == InMulti::Exec)
            .map(|e| e.full_name.as_str())
            .collect();
        assert_eq!(exec, ["exec"]);
        for routing in [
            Routing::Asking,
            Routing::Asked,
            Routing::Migrate,
            Routing::DbZeroOnly,
        ] {
            let n = t
                .entries
                .iter()
                .filter(|e| e.spec.routing == routing)
                .count();
            assert_eq!(n, 1, "{routing:?} belongs to one command");
        }
    }

    /// Keyspace notifications: every write command names the events it emits (or says it
    /// emits none), so no write can forget them, and the names are Redis's kind of name.
    #[test]
    fn every_write_declares_its_keyspace_events() {
        let mut missing = Vec::new();
        for e in table().entries.iter() {
            let s = e.spec;
            let declared: Vec<_> = s.events.iter().flatten().collect();
            if s.flags.contains(Flags::WRITE) && declared.is_empty() && !s.silent {
                missing.push(e.full_name.clone());
            }
            assert!(
                !s.silent || declared.is_empty(),
                "{} is silent but declares events",
                e.full_name
            );
            for ev in declared {
                assert!(
                    !ev.name.is_empty()
                        && ev
                            .name
                            .bytes()
                            .all(|b| b.is_ascii_lowercase() || b == b'_' || b == b'-'),
                    "{}: event name {:?}",
                    e.full_name,
                    ev.name
                );
            }
        }
        assert!(
            missing.is_empty(),
            "write commands without keyspace events: {missing:?}"
        );
    }

    fn run_of(cmds: &[&str]) -> Vec<Vec<bytes::Bytes>> {
        cmds.iter()
            .map(|c| {
                c.split(' ')
                    .map(|a| bytes::Bytes::copy_from_slice(a.as_bytes()))
                    .collect()
            })
            .collect()
    }

    /// A run's prefetch window: the cache's commands by their key specs (a hash read with its
    /// fields), no other command's arguments, and windows of at most PREFETCH_KEYS keys.
    #[test]
    fn prefetch_windows_follow_the_specs() {
        let run = run_of(&[
            "GET a",
            "PING x",
            "SET b 1",
            "HMGET h f1 f2",
            "HSET g f1 v1 f2 v2",
            "EVAL s 1 k",
            "MGET c d e",
        ]);
        let mut keys = smallvec::SmallVec::new();
        assert_eq!(prefetch_window(3, &run, &mut keys), 7);
        let got: Vec<(u16, &[u8], usize, usize)> = keys
            .iter()
            .map(|k| (k.db, k.key, k.fields.len(), k.field_step))
            .collect();
        let want: Vec<(u16, &[u8], usize, usize)> = vec![
            (3, b"a", 0, 1),
            (3, b"b", 0, 1),
            (3, b"h", 2, 1),
            (3, b"g", 4, 2),
            (3, b"c", 0, 1),
            (3, b"d", 0, 1),
            (3, b"e", 0, 1),
        ];
        assert_eq!(got, want);
        assert_eq!(&keys[2].fields[1][..], b"f2");
        // Ten MGETs of ten keys: six fit a window, then the next six, then the rest.
        let mget = format!("MGET{}", " k".repeat(10));
        let run = run_of(&vec![mget.as_str(); 16]);
        let mut starts = vec![0];
        while *starts.last().unwrap() < run.len() {
            let at = *starts.last().unwrap();
            let mut keys = smallvec::SmallVec::new();
            let n = prefetch_window(0, &run[at..], &mut keys);
            assert!(n >= 1 && keys.len() <= crate::cache::PREFETCH_KEYS);
            starts.push(at + n);
        }
        assert_eq!(starts, [0, 6, 12, 16]);
        // One command with more keys than a window still covers itself.
        let big = format!("MGET{}", " k".repeat(100));
        let run = run_of(&[&big, "GET a"]);
        let mut keys = smallvec::SmallVec::new();
        assert_eq!(prefetch_window(0, &run, &mut keys), 1);
        assert_eq!(keys.len(), 100);
    }

    #[test]
    fn lookup_is_case_insensitive_and_bounded() {
        let t = table();
        assert_eq!(t.lookup(b"GeT").unwrap().full_name, "get");
        assert!(t.lookup(b"nosuchcommand").is_none());
        assert!(t.lookup(&[b'a'; 100]).is_none());
    }

    #[test]
    fn the_remembered_lookup_answers_only_its_own_name() {
        let t = table();
        assert_eq!(t.lookup(b"get").unwrap().full_name, "get");
        // Remembered: the same name in any case, nothing longer, shorter or near it.
        assert_eq!(t.lookup(b"GET").unwrap().full_name, "get");
        assert!(t.lookup(b"ge").is_none());
        assert!(t.lookup(b"gets").is_none());
        assert_eq!(t.lookup(b"getex").unwrap().full_name, "getex");
        assert_eq!(t.lookup(b"get").unwrap().full_name, "get");
        // A container remembered, then its subcommand's names: never the subcommand.
        assert_eq!(t.lookup(b"config").unwrap().full_name, "config");
        assert!(t.lookup(b"get").is_some_and(|e| e.full_name == "get"));
        assert!(t.lookup(b"config|get").is_none());
        // Another table (built where a dropped one may have been) does not take this one's.
        for _ in 0..3 {
            assert_eq!(t.lookup(b"get").unwrap().full_name, "get");
            let other = CommandTable::build(&[admin::COMMANDS]);
            assert!(other.lookup(b"get").is_none());
            assert_eq!(other.lookup(b"CONFIG").unwrap().full_name, "config");
            assert!(other.lookup(b"get").is_none());
            assert_eq!(t.lookup(b"get").unwrap().full_name, "get");
        }
    }

    #[test]
    fn unknown_command_error_matches_redis() {
        let args: Vec<bytes::Bytes> = vec!["foo".into(), "a".into(), "b".into()];
        assert_eq!(
            unknown_command(&args).to_string(),
            "ERR unknown command 'foo', with args beginning with: 'a' 'b' "
        );
    }
}
