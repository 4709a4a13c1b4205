//! Scripting: EVAL, EVALSHA, EVAL_RO, EVALSHA_RO, SCRIPT, FUNCTION, FCALL, FCALL_RO, over the
//! `kvik-lua` runtime.
//!
//! # Where scripts run
//!
//! On the I/O thread that read the command while it stays short and in memory (`rtc-scripts`,
//! see [`run`]), else on a worker; either way on that thread's own Lua states ([`engines`]):
//! Lua states are single-threaded, so each thread has its own, following the shared script
//! cache and function libraries of [`crate::scripting`]. Each `redis.call` goes through the
//! dispatcher's path for one command ([`host::ServerHost`]).
//!
//! # Atomicity (Redis runs one script at a time; kvik runs scripts in parallel)
//!
//! - A script locks the stripes of its declared keys (`KEYS`) before it starts and holds them
//!   until it ends, as EXEC does for its queued commands: no other write, EXEC or script on
//!   those keys runs in between, and another script or EXEC that declares them sees all of the
//!   script's writes or none.
//! - A key the script did not declare is locked when the script first touches it and held until
//!   the end, with a bounded wait (see [`host`]); in cluster mode every key must be of the
//!   script's slot and served here (Redis's errors), so scripts written for a cluster behave the
//!   same.
//! - Readers wait for the script's keys (`cmd::isolation`), and its writes reach RocksDB as one
//!   batch when it ends (`storage::txn`): after a crash a script is there whole or not at all,
//!   as Redis's AOF replays it. A script that raises an error half-way keeps the writes it made
//!   (as in Redis).
//!
//! # Runaway scripts
//!
//! Past `busy-reply-threshold` other clients get BUSY for every command without `allow_busy`
//! (as in Redis), answered on the I/O thread so that no worker is needed; SCRIPT KILL and
//! FUNCTION KILL run on the I/O thread too, so a script looping on every worker can still be
//! stopped. They stop the longest-running script (Redis has only one).

mod engines;
mod function;
mod host;

use super::ctx::{io_thread_lock_wait, Args, CmdError, CmdResult, Ctx, ErrorKind, Reply};
use super::spec::{numkeys_at_2, CommandSpec, Flags, KeySpec};
use super::Entry;
use crate::scripting::{Current, FUNCTIONS_RECORD};
use crate::server::Server;
use engines::Engines;
use host::{Rules, ServerHost};
use kvik_lua::{RunContext, ScriptFlags};
use std::borrow::Cow;
use std::sync::atomic::Ordering;
use std::time::Duration;

const EVAL_FLAGS: Flags = Flags::NOSCRIPT
    .union(Flags::STALE)
    .union(Flags::NO_MANDATORY_KEYS);
const SCRIPT_ACL: &[&str] = &["slow", "scripting"];

const fn eval_spec(
    name: &'static str,
    flags: Flags,
    handler: super::spec::Handler,
    summary: &'static str,
    since: &'static str,
) -> CommandSpec {
    CommandSpec::new(name, -3, flags, KeySpec::NONE, handler)
        .rtc_script()
        .movable(numkeys_at_2)
        .acl(SCRIPT_ACL)
        .group("scripting")
        .doc(summary, since, "Depends on the script that is executed.")
}

pub static COMMANDS: &[CommandSpec] = &[
    eval_spec(
        "eval",
        EVAL_FLAGS.union(Flags::MAY_REPLICATE),
        eval,
        "Executes a server-side Lua script.",
        "2.6.0",
    ),
    eval_spec(
        "evalsha",
        EVAL_FLAGS.union(Flags::MAY_REPLICATE),
        evalsha,
        "Executes a server-side Lua script by SHA1 digest.",
        "2.6.0",
    ),
    eval_spec(
        "eval_ro",
        EVAL_FLAGS.union(Flags::READONLY),
        eval_ro,
        "Executes a read-only server-side Lua script.",
        "7.0.0",
    ),
    eval_spec(
        "evalsha_ro",
        EVAL_FLAGS.union(Flags::READONLY),
        evalsha_ro,
        "Executes a read-only server-side Lua script by SHA1 digest.",
        "7.0.0",
    ),
    eval_spec(
        "fcall",
        EVAL_FLAGS.union(Flags::MAY_REPLICATE),
        function::fcall,
        "Invokes a function.",
        "7.0.0",
    ),
    eval_spec(
        "fcall_ro",
        EVAL_FLAGS.union(Flags::READONLY),
        function::fcall_ro,
        "Invokes a read-only function.",
        "7.0.0",
    ),
    CommandSpec::new(
        "script",
        -2,
        Flags::NOSCRIPT,
        KeySpec::NONE,
        super::spec::container,
    )
    .acl(&["slow"])
    .group("scripting")
    .doc(
        "A container for Lua scripts management commands.",
        "2.6.0",
        "Depends on subcommand.",
    )
    .subs(SCRIPT_SUBS),
    CommandSpec::new(
        "function",
        -2,
        Flags::NOSCRIPT,
        KeySpec::NONE,
        super::spec::container,
    )
    .acl(&["slow"])
    .group("scripting")
    .doc(
        "A container for function commands.",
        "7.0.0",
        "Depends on subcommand.",
    )
    .subs(function::SUBS),
];

static SCRIPT_SUBS: &[CommandSpec] = &[
    CommandSpec::new(
        "load",
        3,
        Flags::NOSCRIPT.union(Flags::STALE),
        KeySpec::NONE,
        script_load,
    )
    .acl(SCRIPT_ACL)
    .group("scripting")
    .doc("Loads a server-side Lua script to the script cache.", "2.6.0", "O(N) with N being the length in bytes of the script body."),
    CommandSpec::new("exists", -3, Flags::NOSCRIPT, KeySpec::NONE, script_exists)
        .acl(SCRIPT_ACL)
        .group("scripting")
        .doc("Determines whether server-side Lua scripts exist in the script cache.", "2.6.0", "O(N) with N being the number of scripts to check (so checking a single script is an O(1) operation)."),
    CommandSpec::new("flush", -2, Flags::NOSCRIPT, KeySpec::NONE, script_flush)
        .acl(SCRIPT_ACL)
        .group("scripting")
        .doc("Removes all server-side Lua scripts from the script cache.", "2.6.0", "O(N) with N being the number of scripts in cache"),
    CommandSpec::new(
        "kill",
        2,
        Flags::NOSCRIPT.union(Flags::ALLOW_BUSY),
        KeySpec::NONE,
        script_kill,
    )
    .acl(SCRIPT_ACL)
    .group("scripting")
    .doc("Terminates a server-side Lua script during execution.", "2.6.0", "O(1)"),
    CommandSpec::new("help", 2, Flags::NOSCRIPT, KeySpec::NONE, script_help)
        .acl(SCRIPT_ACL)
        .group("scripting")
        .doc("Returns helpful text about the different subcommands.", "5.0.0", "O(1)"),
];

/// Which script a run is for.
enum Target<'s> {
    Eval(&'s str),
    Function(&'s str),
}

fn eval(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    eval_generic(ctx, args, false, false)
}

fn evalsha(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    eval_generic(ctx, args, true, false)
}

fn eval_ro(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    eval_generic(ctx, args, false, true)
}

fn evalsha_ro(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    eval_generic(ctx, args, true, true)
}

/// A script's keys and its other arguments.
type KeysArgs<'a> = (Vec<&'a [u8]>, Vec<&'a [u8]>);

/// The arguments after the script: keys and the rest, with Redis's `numkeys` errors.
fn keys_and_args(args: &Args) -> Result<KeysArgs<'_>, &'static str> {
    let rest: Vec<&[u8]> = args[2..].iter().map(|a| &a[..]).collect();
    let numkeys = kvik_lua::script::split_keys_args(&rest)?.0.len();
    let mut keys = rest;
    let argv = keys.split_off(numkeys + 1);
    keys.remove(0);
    Ok((keys, argv))
}

fn eval_generic(ctx: &mut Ctx<'_>, args: &Args, by_sha: bool, ro: bool) -> CmdResult {
    let (keys, argv) = keys_and_args(args).map_err(CmdError::from_line)?;
    let server = ctx.server;
    engines::with(server, |eng| {
        let sha = if by_sha {
            eng.eval_sha(&server.scripts, &args[1])
        } else {
            eng.eval_body(&server.scripts, &args[1]).map(Cow::Owned)
        }
        .map_err(|e| CmdError::from_line(&e))?;
        let flags = eng.eval.flags(&sha).unwrap_or_default();
        if ro {
            flags.check_read_only().map_err(CmdError::from_line)?;
        }
        if server.cluster.node().is_some() && flags.contains(ScriptFlags::NO_CLUSTER) {
            return Err(CmdError::fixed(
                "Can not run script on cluster, 'no-cluster' flag is set.",
            ));
        }
        let rules = Rules {
            read_only: ro || flags.contains(ScriptFlags::NO_WRITES),
            cross_slot: flags.contains(ScriptFlags::EVAL_COMPAT_MODE)
                || flags.contains(ScriptFlags::ALLOW_CROSS_SLOT),
        };
        refuse_writes_without_replicas(server, flags, rules)?;
        run(ctx, eng, Target::Eval(&sha), &keys, &argv, rules, args)
    })
}

/// A script that declared flags without `no-writes` is refused before it runs while
/// `min-replicas-to-write` is not met, as Redis does; a script without flags (EVAL's
/// compatibility mode) is checked at each write command instead (see `host`).
fn refuse_writes_without_replicas(
    server: &Server,
    flags: ScriptFlags,
    rules: Rules,
) -> Result<(), CmdError> {
    let declared_writer = !rules.read_only && !flags.contains(ScriptFlags::EVAL_COMPAT_MODE);
    if declared_writer {
        crate::replication::lease::check(server)?;
    }
    if declared_writer && !server.repl.enough_good_replicas(&server.config.repl) {
        return Err(super::NO_GOOD_REPLICAS);
    }
    Ok(())
}

/// Publishes what a thread's script is (FUNCTION STATS, SCRIPT KILL) until dropped.
struct Running<'a> {
    slot: &'a crate::scripting::Slot,
}

impl<'a> Running<'a> {
    fn start(server: &'a Server, slot: &'a crate::scripting::Slot, current: Current) -> Self {
        let ms = server
            .config
            .busy_reply_threshold_ms
            .load(Ordering::Relaxed);
        slot.control.set_busy_threshold(Duration::from_millis(ms));
        *slot.current.lock() = Some(current);
        Running { slot }
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        *self.slot.current.lock() = None;
    }
}

/// How long a script may run on an I/O thread before it is aborted and run on a worker.
pub const IO_THREAD_BUDGET: Duration = Duration::from_millis(2);

thread_local! {
    /// Scripts (SHA or function name) this I/O thread aborted for running past
    /// [`IO_THREAD_BUDGET`]: the pool runs them from then on. Cleared when it grows past
    /// [`LONG_SCRIPTS_KEPT`].
    static LONG_SCRIPTS: std::cell::RefCell<std::collections::HashSet<String, crate::fast_hash::FastHash>> =
        std::cell::RefCell::new(std::collections::HashSet::default());
}

const LONG_SCRIPTS_KEPT: usize = 4096;

/// On an I/O thread: whether a script may be tried here at all. Not while keyspace events or
/// MONITOR could see its commands (an aborted try would show them twice), nor a script known
/// to run long.
fn may_run_here(server: &Server, name: &str) -> bool {
    !server.pubsub.notifying()
        && !server.pubsub.monitoring()
        && !LONG_SCRIPTS.with(|l| l.borrow().contains(name))
}

/// Runs a checked script or function: locks its declared keys for the whole run (see the
/// module's header), then lets the engine write its reply. Its writes are buffered in a
/// transaction (`storage::txn`) written when it ends.
///
/// On an I/O thread (`Mode::NoWait`, `rtc-scripts`) the declared keys are tried, not waited
/// for, the script runs only commands that are themselves run to completion (see `host`) and
/// for at most [`IO_THREAD_BUDGET`]; if anything would wait it is aborted, its buffered writes
/// dropped, and it ends with WouldBlock having changed nothing: the pool runs it from the start.
fn run(
    ctx: &mut Ctx<'_>,
    eng: &mut Engines,
    target: Target<'_>,
    keys: &[&[u8]],
    argv: &[&[u8]],
    rules: Rules,
    command: &Args,
) -> CmdResult {
    let wait = ctx.wait();
    let nowait = ctx.mode.no_wait();
    let Ctx {
        server,
        session,
        out,
        ..
    } = ctx;
    let server: &Server = server;
    let (name, is_function) = match target {
        Target::Eval(sha) => (sha, false),
        Target::Function(f) => (f, true),
    };
    // While RocksDB stalls writes, scripts run on workers (`storage::health`).
    if nowait && (!may_run_here(server, name) || server.storage.writes_may_stall()) {
        return Err(CmdError::WOULD_BLOCK);
    }

    // No SWAPDB of another client falls inside the script (re-entrant under EXEC).
    let _pin = server.storage.dbs().pin();
    let db = server.storage.dbs().physical(session.db);
    let _declared = if nowait {
        let guard = server
            .storage
            .try_lock_in_for(keys.iter().map(|k| (db, *k)), io_thread_lock_wait(server))
            .ok_or(CmdError::KEY_BUSY)?;
        // Waking a blocked client is a worker's job.
        if server.blocking.waits_on_any(session.db, keys) {
            return Err(CmdError::WOULD_BLOCK);
        }
        guard
    } else {
        server.storage.lock(db, keys)
    };
    // Its commits reach replicas as one write, and RocksDB as one batch (`storage::txn`).
    let _atomic = server.storage.atomic_group();
    let txn = server.storage.begin_txn();
    // On an I/O thread the script may be aborted: it then drops what it buffered, not what the
    // turn's transaction it joins buffered before it.
    if nowait {
        server.storage.txn_savepoint();
    }
    let slot = server
        .cluster
        .node()
        .and_then(|_| keys.first())
        .map(|k| kvik_resp::cluster::key_slot(k));
    let proto = out.proto;
    let running_slot = eng.slot.clone();
    let _running = Running::start(
        server,
        &running_slot,
        Current {
            name: name.to_string(),
            command: command.to_vec(),
            is_function,
        },
    );
    let control = &running_slot.control;
    control.set_abort_after(nowait.then_some(IO_THREAD_BUDGET));
    let reply_start = out.buf.len();
    let mut host = ServerHost::new(
        server,
        session,
        rules,
        slot,
        keys,
        nowait.then(|| control.clone()),
        wait,
    );
    let mut run = RunContext::new(&mut host, control, proto, &mut out.buf);
    match target {
        Target::Eval(sha) => eng.eval.run(sha, keys, argv, &mut run),
        Target::Function(f) => eng.functions.run(f, keys, argv, &mut run),
    }
    let over_budget = control.take_aborted() && !host.aborted();
    let aborted = host.aborted() || over_budget;
    drop(host);
    control.set_abort_after(None);
    if aborted {
        server.storage.txn_rollback();
        txn.abort();
        out.buf.truncate(reply_start);
        if over_budget {
            LONG_SCRIPTS.with(|l| {
                let mut l = l.borrow_mut();
                if l.len() >= LONG_SCRIPTS_KEPT {
                    l.clear();
                }
                l.insert(name.to_string());
            });
            server
                .stats
                .rtc_script_budget_aborts
                .fetch_add(1, Ordering::Relaxed);
        }
        return Err(CmdError::WOULD_BLOCK);
    }
    if nowait {
        server.storage.txn_release_savepoint();
    }
    if let Err(e) = txn.commit_with(wait) {
        // Nothing of the script was written: its reply goes, the error takes its place (on an
        // I/O thread, a write that would stall: the pool runs it again).
        out.buf.truncate(reply_start);
        let e = CmdError::from(e);
        if e.kind.waits() {
            return Err(e);
        }
        out.error(&e);
    }
    Ok(())
}

fn script_load(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let server = ctx.server;
    let sha = engines::with(server, |eng| {
        eng.script_load(&server.scripts, &args[2])
            .map_err(|e| CmdError::from_line(&e))
    })?;
    ctx.out.bulk(sha.as_bytes());
    Ok(())
}

fn script_exists(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let cache = ctx.server.scripts.eval.read();
    ctx.out.array(args.len() - 2);
    for sha in &args[2..] {
        let sha = String::from_utf8_lossy(sha).to_ascii_lowercase();
        ctx.out.int(i64::from(cache.contains(&sha)));
    }
    Ok(())
}

/// `[ASYNC|SYNC]` of SCRIPT FLUSH and FUNCTION FLUSH (both are done at once: the cache is
/// small and the Lua states are dropped by their own threads).
fn flush_mode(args: &Args, at: usize) -> CmdResult {
    match args.get(at) {
        None => Ok(()),
        Some(m)
            if args.len() == at + 1
                && (m.eq_ignore_ascii_case(b"async") || m.eq_ignore_ascii_case(b"sync")) =>
        {
            Ok(())
        }
        Some(_) => Err(CmdError::fixed(
            "SCRIPT FLUSH only support SYNC|ASYNC option",
        )),
    }
}

fn script_flush(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    flush_mode(args, 2)?;
    let scripts = &ctx.server.scripts;
    *scripts.eval.write() = Default::default();
    scripts.eval_generation.fetch_add(1, Ordering::AcqRel);
    ctx.out.ok();
    Ok(())
}

fn script_kill(ctx: &mut Ctx<'_>, _args: &Args) -> CmdResult {
    kill_on(ctx.server, ctx.out, true)
}

/// SCRIPT KILL / FUNCTION KILL, on whichever thread receives it.
fn kill_on(server: &Server, out: &mut Reply, from_script_kill: bool) -> CmdResult {
    server
        .scripts
        .kill(from_script_kill)
        .map_err(CmdError::from_line)?;
    out.ok();
    Ok(())
}

fn script_help(ctx: &mut Ctx<'_>, _args: &Args) -> CmdResult {
    super::admin::help_reply(
        ctx.out,
        "SCRIPT",
        &[
            "EXISTS <sha1> [<sha1> ...]",
            "    Return information about the existence of the scripts in the script cache.",
            "FLUSH [ASYNC|SYNC]",
            "    Flush the Lua scripts cache. Very dangerous on replicas.",
            "    When called without the optional mode argument, the behavior is determined by the",
            "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
            "    * ASYNC: Asynchronously flush the scripts cache.",
            "    * SYNC: Synchronously flush the scripts cache.",
            "KILL",
            "    Kill the currently executing Lua script.",
            "LOAD <script>",
            "    Load a script into the scripts cache without executing it.",
        ],
    );
    Ok(())
}

/// What the I/O thread does with a command while scripts run (see [`on_io_thread`]).
pub(crate) enum IoServe {
    /// SCRIPT KILL or FUNCTION KILL: run it here, no worker needed.
    Run(fn(&Server, &mut Reply) -> CmdResult),
    /// A script is busy and the command may not run: this error.
    Busy(CmdError),
}

/// Commands the I/O thread answers itself because of scripts: the KILLs, and BUSY refusals.
/// One atomic load when no script is busy.
pub(crate) fn on_io_thread(server: &Server, entry: &Entry) -> Option<IoServe> {
    if entry.spec.flags.contains(Flags::ALLOW_BUSY) {
        return match entry.full_name.as_str() {
            "script|kill" => Some(IoServe::Run(|s, out| kill_on(s, out, true))),
            "function|kill" => Some(IoServe::Run(|s, out| kill_on(s, out, false))),
            _ => None,
        };
    }
    busy_refusal(server, entry).map(IoServe::Busy)
}

/// BUSY for a command without `allow_busy` while a script runs past `busy-reply-threshold`.
pub(crate) fn busy_refusal(server: &Server, entry: &Entry) -> Option<CmdError> {
    if entry.spec.flags.contains(Flags::ALLOW_BUSY) {
        return None;
    }
    let line = server.scripts.busy()?;
    Some(CmdError::with(
        ErrorKind::Busy,
        line.strip_prefix("BUSY ").unwrap_or(line),
    ))
}

/// At startup: the function libraries persisted by FUNCTION LOAD & co., checked by building
/// them once; every thread loads them on its first script.
pub fn load_persisted(server: &Server) -> Result<(), String> {
    let payload = server
        .storage
        .get_internal(FUNCTIONS_RECORD)
        .map_err(|e| format!("cannot read the function libraries: {e}"))?;
    let Some(payload) = payload else {
        return Ok(());
    };
    let mut check = kvik_lua::FunctionEngine::new();
    crate::scripting::load_libraries(&mut check, Some(&payload))
        .map_err(|e| format!("cannot load the persisted function libraries: {e}"))?;
    let (libraries, functions) = check.counts();
    tracing::info!(libraries, functions, "function libraries loaded");
    let mut libs = server.scripts.libraries.lock();
    libs.payload = Some(payload);
    libs.generation += 1;
    server
        .scripts
        .libraries_generation
        .store(libs.generation, Ordering::Release);
    Ok(())
}
