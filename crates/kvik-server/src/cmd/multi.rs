//! Transactions: MULTI EXEC DISCARD WATCH UNWATCH, with Redis 7.0's semantics.
//!
//! While a session is in MULTI, the dispatcher ([`super::execute_with`]) checks each command as
//! usual (unknown command, arity, auth, `no_multi`) and, instead of running it, queues it here
//! and replies `+QUEUED`; a rejected command replies its error and makes EXEC fail with
//! EXECABORT. Commands whose spec says [`InMulti::RunsNow`] or [`InMulti::Exec`] (MULTI, EXEC,
//! DISCARD, WATCH, QUIT, RESET) are never queued.
//!
//! Isolation: EXEC locks the stripes of every key of every queued command, and of the watched
//! keys, all at once (in ascending stripe order, like any multi-key write), checks WATCH, then
//! runs the commands one after another through the dispatcher's normal path (stats, slowlog)
//! while holding them; the handlers lock their keys again, which the re-entrant stripe locks
//! turn into no-ops. So no other write to those keys interleaves with a transaction. Readers take
//! no lock and may see the first writes of a transaction before its last ones (as they would see
//! any two consecutive writes); they never see a write half done.
//!
//! Memory: a session's queue is bounded by `client-query-buffer-limit` (1gb by default),
//! counting each argument's bytes plus a fixed overhead per argument and per command. A client
//! that queues past it is disconnected, as Redis disconnects a client whose query buffer passes
//! that limit.

use super::ctx::{Args, CmdError, CmdResult, Ctx, ErrorKind, Mode, Reply};
use super::spec::{CacheEffect, CommandSpec, DbRef, Flags, InMulti, KeySpec};
use super::{table, Entry};
use crate::server::Server;
use crate::session::{MultiState, Queued, Session};
use bytes::Bytes;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

const TX: Flags = Flags::NOSCRIPT
    .union(Flags::LOADING)
    .union(Flags::STALE)
    .union(Flags::FAST)
    .union(Flags::ALLOW_BUSY);

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::new("multi", 1, TX, KeySpec::NONE, multi)
        .in_multi(InMulti::RunsNow)
        .acl(&["fast", "transaction"])
        .group("transactions")
        .doc("Starts a transaction.", "1.2.0", "O(1)"),
    CommandSpec::new(
        "exec",
        1,
        Flags::NOSCRIPT
            .union(Flags::LOADING)
            .union(Flags::STALE)
            .union(Flags::SKIP_SLOWLOG),
        KeySpec::NONE,
        exec,
    )
    .in_multi(InMulti::Exec)
    .acl(&["slow", "transaction"])
    .group("transactions")
    .doc(
        "Executes all commands in a transaction.",
        "1.2.0",
        "Depends on commands in the transaction",
    ),
    CommandSpec::new("discard", 1, TX, KeySpec::NONE, discard)
        .in_multi(InMulti::RunsNow)
        .acl(&["fast", "transaction"])
        .group("transactions")
        .doc(
            "Discards a transaction.",
            "2.0.0",
            "O(N), when N is the number of queued commands",
        ),
    CommandSpec::new("watch", -2, TX, KeySpec::ALL, watch)
        .in_multi(InMulti::RunsNow)
        .acl(&["fast", "transaction"])
        .group("transactions")
        .doc(
            "Monitors changes to keys to determine the execution of a transaction.",
            "2.2.0",
            "O(1) for every key.",
        ),
    CommandSpec::new("unwatch", 1, TX, KeySpec::NONE, unwatch)
        .acl(&["fast", "transaction"])
        .group("transactions")
        .doc(
            "Forgets about watched keys of a transaction.",
            "2.2.0",
            "O(1)",
        ),
];

/// Memory counted per queued command and per argument, on top of the argument bytes.
const COMMAND_OVERHEAD: usize = 64;
const ARG_OVERHEAD: usize = 32;

/// Writes a rejection error (unknown command, arity, auth) for a session that may be in MULTI,
/// as Redis's `rejectCommand`: inside MULTI the transaction is flagged to fail at EXEC, and a
/// rejected EXEC itself discards the transaction with "EXECABORT Transaction discarded because
/// of: <error>".
pub(super) fn reject(session: &mut Session, out: &mut Reply, id: Option<usize>, e: &CmdError) {
    if session.multi.is_none() {
        out.error(e);
        return;
    }
    if id.is_some_and(|id| table().entry(id).spec.in_multi == InMulti::Exec) {
        session.multi = None;
        session.watches.clear();
        let cause = match e.prefix() {
            "ERR" => e.message().to_string(),
            _ => e.to_string(),
        };
        out.error(&CmdError::with(
            ErrorKind::ExecAbort,
            format_args!("Transaction discarded because of: {cause}"),
        ));
        return;
    }
    if let Some(m) = &mut session.multi {
        m.failed = true;
    }
    out.error(e);
}

/// Before a resolved, authorized command runs: inside MULTI every command whose spec says
/// [`InMulti::Queued`] is queued (or refused if `no_multi`). Returns true if the command was
/// dealt with here (its reply is in `out`).
pub(super) fn intercept(
    server: &Server,
    session: &mut Session,
    out: &mut Reply,
    entry: &Entry,
    args: &Args,
) -> bool {
    let Some(state) = &mut session.multi else {
        return false;
    };
    if entry.spec.in_multi != InMulti::Queued {
        return false;
    }
    if entry.spec.flags.contains(Flags::NO_MULTI) {
        let e = CmdError::fixed("Command not allowed inside a transaction");
        server.stats.record_rejected(Some(entry.id), &e);
        state.failed = true;
        out.error(&e);
        return true;
    }
    state.bytes += COMMAND_OVERHEAD + args.iter().map(|a| a.len() + ARG_OVERHEAD).sum::<usize>();
    let limit = server
        .config
        .client_query_buffer_limit
        .load(Ordering::Relaxed) as usize;
    if state.bytes > limit {
        tracing::warn!(
            client = %session.client.addr,
            queued = state.queue.len(),
            bytes = state.bytes,
            "closing client whose MULTI queue reached client-query-buffer-limit"
        );
        session.multi = None;
        session.watches.clear();
        session.close_after_reply = true;
        return true;
    }
    state.queue.push(Queued {
        id: entry.id,
        args: args.to_vec(),
    });
    out.simple("QUEUED");
    true
}

fn multi(ctx: &mut Ctx<'_>, _args: &Args) -> CmdResult {
    if ctx.session.multi.is_some() {
        return Err(CmdError::fixed("MULTI calls can not be nested"));
    }
    ctx.session.multi = Some(MultiState::default());
    ctx.out.ok();
    Ok(())
}

fn discard(ctx: &mut Ctx<'_>, _args: &Args) -> CmdResult {
    if ctx.session.multi.take().is_none() {
        return Err(CmdError::fixed("DISCARD without MULTI"));
    }
    ctx.session.watches.clear();
    ctx.out.ok();
    Ok(())
}

fn watch(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    if ctx.session.multi.is_some() {
        return Err(CmdError::fixed("WATCH inside MULTI is not allowed"));
    }
    let server = ctx.server;
    let db = ctx.session.db; // watches are kept by logical database
    let now = ctx.now_ms;
    ctx.session
        .watches
        .watch(&server.watches, ctx.storage(), db, &args[1..], now)?;
    ctx.out.ok();
    Ok(())
}

fn unwatch(ctx: &mut Ctx<'_>, _args: &Args) -> CmdResult {
    ctx.session.watches.clear();
    ctx.out.ok();
    Ok(())
}

/// The (logical db, key) pairs EXEC locks for the queued commands: each command's keys in the database
/// it will run in (a queued SELECT changes it for the commands after it), plus the keys a
/// command names in another database (MOVE, COPY ... DB): the spec's [`DbRef`]s.
pub(super) fn lock_set(queue: &[Queued], mut db: u16, databases: u16) -> Vec<(u16, Bytes)> {
    let parse_db = |a: &Bytes| {
        kvik_resp::parse_i64(a)
            .filter(|n| (0..databases as i64).contains(n))
            .map(|n| n as u16)
    };
    let mut keys = Vec::new();
    for q in queue {
        let entry = table().entry(q.id);
        let args = &q.args;
        keys.extend(
            entry
                .spec
                .key_positions(args)
                .into_iter()
                .filter_map(|p| args.get(p))
                .map(|k| (db, k.clone())),
        );
        let refs = entry.spec.db_refs.map(|f| f(args)).unwrap_or_default();
        for r in refs {
            match r {
                DbRef::Selects(at) => {
                    if let Some(n) = args.get(at).and_then(parse_db) {
                        db = n;
                    }
                }
                DbRef::KeyIn { key, db: at } => {
                    if let (Some(key), Some(n)) = (args.get(key), args.get(at).and_then(parse_db)) {
                        keys.push((n, key.clone()));
                    }
                }
            }
        }
    }
    keys
}

fn exec(ctx: &mut Ctx<'_>, _args: &Args) -> CmdResult {
    let Some(state) = ctx.session.multi.take() else {
        return Err(CmdError::fixed("EXEC without MULTI"));
    };
    if state.failed {
        ctx.session.watches.clear();
        return Err(CmdError::new(
            ErrorKind::ExecAbort,
            "Transaction discarded because of previous errors.",
        ));
    }
    let server = ctx.server;
    let storage = ctx.storage();
    // No SWAPDB of another client falls between the queued commands.
    let _pin = storage.dbs().pin();
    let mut keys = lock_set(&state.queue, ctx.session.db, server.config.databases());
    keys.extend(
        ctx.session
            .watches
            .keys()
            .map(|(db, k)| (db, Bytes::copy_from_slice(k))),
    );
    // A queued flush must not wait for writers that wait for this EXEC's keys: it closes the
    // flush gate before they are locked (`storage::flush_gate`).
    let flushes = state
        .queue
        .iter()
        .any(|q| table().entry(q.id).spec.cache == CacheEffect::Flush);
    let _closed = flushes.then(|| storage.close_flush_gate());
    let dbs = storage.dbs();
    let _guard = storage.lock_in(keys.iter().map(|(db, k)| (dbs.physical(*db), &k[..])));
    let dirty = ctx.session.watches.is_dirty(storage, ctx.now_ms);
    ctx.session.watches.clear();
    if dirty? {
        ctx.out.null_array();
        return Ok(());
    }
    let exec_id = ctx.session.client.last_cmd.load(Ordering::Relaxed);
    let reply_start = ctx.out.buf.len();
    ctx.out.array(state.queue.len());
    ctx.session.in_exec = true;
    // Its commits reach replicas as one write, and RocksDB as one batch (`storage::txn`).
    let _atomic = storage.atomic_group();
    let txn = storage.begin_txn();
    for q in &state.queue {
        let entry = table().entry(q.id);
        let acl = crate::acl::Context::Exec;
        if let Err(e) = crate::acl::admit(server, ctx.session, entry, &q.args, acl) {
            ctx.out.error(&e);
            continue;
        }
        let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            super::run_entry(
                server,
                ctx.session,
                ctx.out,
                entry,
                &q.args,
                Mode::Normal,
                Duration::ZERO,
                Instant::now(),
                None,
            )
        }));
        if ran.is_err() {
            tracing::error!(command = %entry.full_name, "command panicked inside EXEC");
            ctx.out.error(&super::INTERNAL_ERROR);
        }
    }
    ctx.session.in_exec = false;
    ctx.session
        .client
        .last_cmd
        .store(exec_id, Ordering::Relaxed);
    if let Err(e) = txn.commit() {
        // Nothing of it was written: the replies go, EXEC fails.
        ctx.out.buf.truncate(reply_start);
        return Err(e.into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queued(args: &[&str]) -> Queued {
        let args: Vec<Bytes> = args.iter().map(|s| Bytes::from(s.to_string())).collect();
        let id = table().resolve(&args).unwrap().id;
        Queued { id, args }
    }

    #[test]
    fn lock_set_follows_select_move_and_copy() {
        let q = vec![
            queued(&["set", "a", "1"]),
            queued(&["select", "3"]),
            queued(&["mget", "b", "c"]),
            queued(&["move", "d", "5"]),
            queued(&["copy", "e", "f", "DB", "7", "REPLACE"]),
            queued(&["select", "99"]),
            queued(&["get", "g"]),
        ];
        let got: Vec<(u16, String)> = lock_set(&q, 0, 16)
            .into_iter()
            .map(|(db, k)| (db, String::from_utf8(k.to_vec()).unwrap()))
            .collect();
        let want: Vec<(u16, String)> = [
            (0, "a"),
            (3, "b"),
            (3, "c"),
            (3, "d"),
            (5, "d"),
            (3, "e"),
            (3, "f"),
            (7, "f"),
            (3, "g"),
        ]
        .iter()
        .map(|(d, k)| (*d, k.to_string()))
        .collect();
        assert_eq!(got, want);
    }
}
