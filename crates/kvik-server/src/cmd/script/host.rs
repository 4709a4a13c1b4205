//! [`ServerHost`]: the server side of a running script. Each `redis.call` / `redis.pcall` is
//! run through the dispatcher's normal path for one command (`run_entry`: the handler, stats,
//! slowlog), after the checks Redis makes for scripts, in Redis's order: unknown command,
//! arity, `noscript`, writes from a read-only script, and in cluster mode the key's slot.
//!
//! On an I/O thread (`rtc-scripts`, see `super`) the host runs a command only if the command
//! is itself run on I/O threads (its spec's `rtc_write`, `rtc_nowait_read`, `rtc_storage` or
//! `io_thread`),
//! in [`Mode::NoWait`], with the keys it did not declare tried rather than waited for;
//! anything else aborts the script ([`ServerHost::aborted`]): the caller drops what it
//! buffered and the pool runs it again.
//!
//! Locks: the script's declared keys are locked for the whole run by the caller. A command on
//! a key the script did not declare takes that key's stripe here and keeps it until the script
//! ends (so the script's later commands on it are isolated too), but waits for it at most
//! [`UNDECLARED_LOCK_WAIT`]: the script already holds locks taken out of the ascending order
//! every other writer follows, so an unbounded wait could deadlock. Past the wait the command
//! fails with [`UNDECLARED_BUSY`].

use super::super::ctx::{Mode, Reply, IO_THREAD_LOCK_WAIT_KEEPING};
use super::super::multi::lock_set;
use super::super::spec::Flags;
use super::super::{run_entry, table, try_run_entry, Entry};
use crate::server::Server;
use crate::session::{Queued, Session};
use crate::storage::locks::{KeyGuard, Patience};
use crate::storage::Wait;
use bytes::Bytes;
use kvik_lua::{errors, Host, HostReply, LogLevel, ScriptControl};
use kvik_resp::{Frame, Proto};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a script waits for the lock of a key it did not declare.
pub const UNDECLARED_LOCK_WAIT: Duration = Duration::from_secs(1);

/// The error of a command on an undeclared key another client kept locked.
pub const UNDECLARED_BUSY: &str = "ERR Script attempted to access a key it did not declare (KEYS) while another client held it; declare every key the script touches";

/// What a command of an aborted script answers (nobody sees it: the script's reply is
/// dropped and the pool runs it again).
const MOVED_TO_WORKER: &str = "ERR kvik: the script continues on a worker";

const CROSS_SLOT: &str = "ERR Script attempted to access keys that do not hash to the same slot";
const READONLY_REPLICA: &str = "READONLY You can't write against a read only replica.";
const NO_GOOD_REPLICAS: &str = "NOREPLICAS Not enough good replicas to write.";
/// A write while the disk cannot take it (`storage::health`); INFO says why.
const DISK_REFUSED: &str = "MISCONF Errors writing to the disk: writes are refused (INFO persistence, kvik_write_refusal, says why)";
const NON_LOCAL: &str = "ERR Script attempted to access a non local key in a cluster node";

/// What the script may do, from its command and flags.
#[derive(Clone, Copy, Debug)]
pub struct Rules {
    /// EVAL_RO / FCALL_RO, or a `no-writes` script: write commands are refused.
    pub read_only: bool,
    /// Cluster mode: keys of several slots are allowed (`allow-cross-slot-keys`, or a script
    /// without shebang, as Redis 7 keeps for old scripts).
    pub cross_slot: bool,
}

/// The server side of one script run.
pub struct ServerHost<'a> {
    server: &'a Server,
    session: &'a mut Session,
    rules: Rules,
    /// Cluster mode: the slot the script's keys must share (its declared keys' slot, else the
    /// first key it touches).
    slot: Option<u16>,
    /// The keys the script declared (`KEYS`), locked by the caller for the whole run.
    declared: &'a [&'a [u8]],
    /// Stripes of undeclared keys, held until the script ends.
    guards: Vec<KeyGuard<'a>>,
    /// The session as the script found it, restored when the run ends: a script's SELECT does
    /// not outlive it (Redis 7), and its commands must not block (as inside EXEC).
    saved_db: u16,
    saved_proto: Proto,
    saved_in_exec: bool,
    saved_in_script: bool,
    saved_last_cmd: usize,
    /// Run on an I/O thread: nothing may wait (see the module's header); `control` stops
    /// the script when something would.
    nowait: Option<Arc<ScriptControl>>,
    /// How the script's commands may wait (on an I/O thread: whether they may read the disk).
    wait: Wait,
    aborted: bool,
}

impl<'a> ServerHost<'a> {
    /// The host of a script; `nowait`: on an I/O thread, with the control that stops it, and
    /// `wait` says whether its reads may go to disk there.
    pub fn new(
        server: &'a Server,
        session: &'a mut Session,
        rules: Rules,
        slot: Option<u16>,
        declared: &'a [&'a [u8]],
        nowait: Option<Arc<ScriptControl>>,
        wait: Wait,
    ) -> ServerHost<'a> {
        let saved_db = session.db;
        let saved_proto = session.proto;
        let saved_in_exec = session.in_exec;
        let saved_in_script = session.in_script;
        let saved_last_cmd = session.client.last_cmd.load(Ordering::Relaxed);
        session.in_exec = true;
        session.in_script = true;
        ServerHost {
            server,
            session,
            rules,
            slot,
            declared,
            guards: Vec::new(),
            saved_db,
            saved_proto,
            saved_in_exec,
            saved_in_script,
            saved_last_cmd,
            nowait,
            wait,
            aborted: false,
        }
    }

    /// Whether the script had to stop because something would have waited on the I/O thread.
    pub fn aborted(&self) -> bool {
        self.aborted
    }

    /// Stops the script (see [`ServerHost::aborted`]).
    fn abort(&mut self) -> HostReply {
        self.aborted = true;
        if let Some(control) = &self.nowait {
            control.abort();
        }
        error_reply(MOVED_TO_WORKER)
    }

    /// Resolves and checks one command of the script; `Err` is Redis's error line.
    fn admit(&mut self, argv: &[Bytes]) -> Result<&'static Entry, &'static str> {
        let entry = match table().resolve(argv) {
            Ok(e) => e,
            Err((Some(id), _)) if table().entry(id).spec.arity_ok(argv.len()) => {
                // A known container with an unknown subcommand.
                return Err(errors::UNKNOWN_COMMAND);
            }
            Err((Some(_), e)) if e.message().starts_with("wrong number") => {
                return Err(errors::WRONG_ARITY)
            }
            Err(_) => return Err(errors::UNKNOWN_COMMAND),
        };
        let flags = entry.spec.flags;
        if flags.contains(Flags::NOSCRIPT) {
            return Err(errors::NOT_ALLOWED);
        }
        let lua = crate::acl::Context::Lua;
        crate::acl::check_and_log(self.server, self.session, entry, argv, lua)
            .map_err(crate::acl::lua_refusal)?;
        if self.rules.read_only && flags.intersects(Flags::WRITE.union(Flags::MAY_REPLICATE)) {
            return Err(errors::WRITE_FROM_READONLY);
        }
        if flags.contains(Flags::WRITE) && self.server.storage.health().refuse().is_some() {
            return Err(DISK_REFUSED);
        }
        if flags.contains(Flags::WRITE)
            && self.server.repl.is_replica()
            && self.server.config.repl.read_only.load(Ordering::Relaxed)
        {
            return Err(READONLY_REPLICA);
        }
        if flags.contains(Flags::WRITE) {
            crate::replication::lease::check_line(self.server)?;
        }
        if flags.contains(Flags::WRITE)
            && !self
                .server
                .repl
                .enough_good_replicas(&self.server.config.repl)
        {
            return Err(NO_GOOD_REPLICAS);
        }
        if let Some(node) = self.server.cluster.node() {
            let state = node.state.read();
            for p in entry.spec.key_positions(argv) {
                let Some(key) = argv.get(p) else { continue };
                let slot = kvik_resp::cluster::key_slot(key);
                if !state.mine(slot) {
                    return Err(NON_LOCAL);
                }
                match self.slot {
                    None => self.slot = Some(slot),
                    Some(s) if s != slot && !self.rules.cross_slot => return Err(CROSS_SLOT),
                    Some(_) => {}
                }
            }
        }
        Ok(entry)
    }

    /// Whether every key `argv` touches is one the script declared, in the database it was
    /// declared in: then the caller's lock already covers the command.
    fn only_declared(&self, entry: &Entry, argv: &[Bytes]) -> bool {
        self.session.db == self.saved_db
            && entry.spec.db_refs.is_none()
            && entry
                .spec
                .key_positions(argv)
                .into_iter()
                .filter_map(|p| argv.get(p))
                .all(|k| self.declared.contains(&&k[..]))
    }

    /// Locks the keys `argv` touches that the script does not hold yet (bounded wait).
    fn lock_undeclared(&mut self, entry: &Entry, argv: &[Bytes]) -> Result<(), &'static str> {
        if self.only_declared(entry, argv) {
            return Ok(());
        }
        let queued = [Queued {
            id: entry.id,
            args: argv.to_vec(),
        }];
        let keys = lock_set(&queued, self.session.db, self.server.config.databases());
        if keys.is_empty() {
            return Ok(());
        }
        let storage: &'a crate::storage::Storage = &self.server.storage;
        let wait = if self.nowait.is_some() {
            IO_THREAD_LOCK_WAIT_KEEPING
        } else {
            UNDECLARED_LOCK_WAIT
        };
        let guard = storage
            .try_lock_in_for(
                keys.iter()
                    .map(|(db, k)| (storage.dbs().physical(*db), &k[..])),
                Patience::uniform(wait),
            )
            .ok_or(UNDECLARED_BUSY)?;
        self.guards.push(guard);
        Ok(())
    }
}

impl Drop for ServerHost<'_> {
    fn drop(&mut self) {
        self.session.db = self.saved_db;
        self.session.proto = self.saved_proto;
        self.session.in_exec = self.saved_in_exec;
        self.session.in_script = self.saved_in_script;
        self.session
            .client
            .last_cmd
            .store(self.saved_last_cmd, Ordering::Relaxed);
        // Release in the reverse order of taking.
        while self.guards.pop().is_some() {}
    }
}

fn error_reply(line: &str) -> HostReply {
    HostReply::from(Frame::Error(line.to_string()))
}

impl Host for ServerHost<'_> {
    fn call(&mut self, args: Vec<Vec<u8>>, resp: u8) -> HostReply {
        if self.aborted {
            return error_reply(MOVED_TO_WORKER);
        }
        let argv: Vec<Bytes> = args.into_iter().map(Bytes::from).collect();
        let entry = match self.admit(&argv) {
            Ok(e) => e,
            Err(line) => return error_reply(line),
        };
        let spec = entry.spec;
        let on_io_thread =
            spec.rtc_write || spec.rtc_nowait_read || spec.rtc_storage || spec.io_thread;
        if self.nowait.is_some() && !on_io_thread {
            return self.abort();
        }
        if let Err(line) = self.lock_undeclared(entry, &argv) {
            if self.nowait.is_some() {
                return self.abort();
            }
            return error_reply(line);
        }
        let proto = if resp == 3 {
            Proto::Resp3
        } else {
            Proto::Resp2
        };
        self.session.proto = proto;
        let mut reply = Reply::new(proto);
        if self.nowait.is_some() {
            let disk_reads = self.wait == Wait::ReadsOnly;
            let ran = try_run_entry(
                self.server,
                self.session,
                &mut reply,
                entry,
                &argv,
                disk_reads,
            );
            if !ran {
                self.session.proto = self.saved_proto;
                return self.abort();
            }
        } else {
            run_entry(
                self.server,
                self.session,
                &mut reply,
                entry,
                &argv,
                Mode::Normal,
                Duration::ZERO,
                Instant::now(),
                None,
            );
        }
        self.session.proto = self.saved_proto;
        let limits = kvik_resp::Limits {
            max_bulk_len: u64::MAX,
            max_multibulk_len: u64::MAX,
            ..Default::default()
        };
        let frame = match kvik_resp::parse_frame(&reply.buf, &limits) {
            Ok(Some((frame, _))) => frame,
            _ => Frame::Error("ERR internal error: unreadable reply".into()),
        };
        let failed = matches!(frame, Frame::Error(_) | Frame::BlobError(_));
        HostReply {
            wrote: entry.spec.flags.contains(Flags::WRITE) && !failed,
            frame,
        }
    }

    fn log(&mut self, level: LogLevel, message: &[u8]) {
        let message = String::from_utf8_lossy(message);
        match level {
            LogLevel::Debug | LogLevel::Verbose => tracing::debug!(target: "script", "{message}"),
            LogLevel::Notice => tracing::info!(target: "script", "{message}"),
            LogLevel::Warning => tracing::warn!(target: "script", "{message}"),
        }
    }
}
