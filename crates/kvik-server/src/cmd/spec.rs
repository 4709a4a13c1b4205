//! The shape of one command table entry.
//!
//! A [`CommandSpec`] is declarative data: name, arity, flags, key positions, how the command
//! changes the hot cache, and its handler. The dispatcher derives from it the arity check, the
//! auth check, routing (I/O thread or worker pool), key extraction (cluster slots, locks) and the
//! COMMAND INFO / DOCS / COUNT replies. Nothing about a command is decided anywhere else.
//!
//! Keyspace notifications: a write command declares the events it may emit, with Redis's class
//! and name (`.event(Class::List, "lpush")`, one call per event, or `.no_events()` for a write
//! Redis does not notify), and its handler emits them with `ctx.notify(Class::List, "lpush",
//! key)` right after its commit (`ctx.notify_in(db, ...)` for another database). A handler
//! that empties a collection also emits `del` (`collection::notify_write` does both; the
//! collection writers have `commit_notify`). `expired` and `new` need nothing from handlers:
//! the commit emits them. A table test fails for any write command that declares nothing.

use super::cached::RtcHandler;
use super::ctx::{Args, CmdResult, Ctx};
pub use crate::cluster::routing::Routing;
pub use crate::pubsub::notify::{Class, Event};

/// Most keyspace events one command can declare.
pub const MAX_EVENTS: usize = 6;

bitflags::bitflags! {
    /// Command flags, named and meant as Redis's `CMD_*` flags (COMMAND INFO prints them).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct Flags: u32 {
        /// May modify the keyspace.
        const WRITE = 1 << 0;
        /// Only reads the keyspace.
        const READONLY = 1 << 1;
        /// May grow memory; refused when the server is out of memory.
        const DENYOOM = 1 << 2;
        /// Administrative command.
        const ADMIN = 1 << 3;
        /// Constant or O(log N) time: a candidate for answering on the I/O thread.
        const FAST = 1 << 4;
        /// Allowed before AUTH.
        const NO_AUTH = 1 << 5;
        /// Allowed while loading.
        const LOADING = 1 << 6;
        /// Allowed on a stale replica.
        const STALE = 1 << 7;
        /// Never recorded in the slowlog.
        const SKIP_SLOWLOG = 1 << 8;
        /// Not allowed inside MULTI.
        const NO_MULTI = 1 << 9;
        /// Key positions are not given by first/last/step alone.
        const MOVABLE_KEYS = 1 << 10;
        /// May block the client.
        const BLOCKING = 1 << 11;
        /// Not allowed from scripts.
        const NOSCRIPT = 1 << 12;
        /// Part of the pub/sub family.
        const PUBSUB = 1 << 13;
        /// Allowed while the server is busy.
        const ALLOW_BUSY = 1 << 14;
        /// No key argument is required.
        const NO_MANDATORY_KEYS = 1 << 15;
        /// Changes no key but is propagated (PUBLISH, EVAL, FCALL): refused from read-only
        /// scripts like a write.
        const MAY_REPLICATE = 1 << 16;
        /// Refused unless `enable-debug-command` allows it (DEBUG), when it arrives, so inside
        /// MULTI at queueing time (Redis's internal CMD_PROTECTED; COMMAND INFO does not show it).
        const PROTECTED = 1 << 17;
    }
}

impl Flags {
    /// The names Redis prints in COMMAND INFO, in Redis's order.
    pub fn names(self) -> Vec<&'static str> {
        const NAMES: &[(Flags, &str)] = &[
            (Flags::WRITE, "write"),
            (Flags::READONLY, "readonly"),
            (Flags::DENYOOM, "denyoom"),
            (Flags::ADMIN, "admin"),
            (Flags::PUBSUB, "pubsub"),
            (Flags::NOSCRIPT, "noscript"),
            (Flags::BLOCKING, "blocking"),
            (Flags::LOADING, "loading"),
            (Flags::STALE, "stale"),
            (Flags::SKIP_SLOWLOG, "skip_slowlog"),
            (Flags::FAST, "fast"),
            (Flags::NO_AUTH, "no_auth"),
            (Flags::NO_MULTI, "no_multi"),
            (Flags::ALLOW_BUSY, "allow_busy"),
            (Flags::MAY_REPLICATE, "may_replicate"),
            (Flags::NO_MANDATORY_KEYS, "no_mandatory_keys"),
            (Flags::MOVABLE_KEYS, "movablekeys"),
        ];
        NAMES
            .iter()
            .filter(|(f, _)| self.contains(*f))
            .map(|(_, n)| *n)
            .collect()
    }
}

/// How a command changes the hot cache (issue: embedded cache). Every command that writes must
/// declare one; a test walks the table so no write command can forget it (each cache bug
/// reported in Pika was a write that forgot its cache update).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheEffect {
    /// Reads, or touches no key.
    None,
    /// Rewrites the cached entries of the keys it writes (only keys already cached).
    Update,
    /// Drops the cached entries of the keys it touches.
    Invalidate,
    /// Drops the whole cache (FLUSHDB, FLUSHALL).
    Flush,
    /// Changes which database the cached entries answer for (SWAPDB): none is touched, since
    /// entries are keyed by on-disk database and the lookup translates.
    Remap,
}

/// Where a hash command's field arguments are: every `step`th argument from `at` on (0: none).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FieldArgs {
    pub at: u8,
    pub step: u8,
}

impl FieldArgs {
    pub const NONE: FieldArgs = FieldArgs { at: 0, step: 1 };
    /// `HMGET key field ...`, `HDEL key field ...`.
    pub const ALL: FieldArgs = FieldArgs { at: 2, step: 1 };
    /// `HSET key field value ...`, `HINCRBY key field increment`.
    pub const PAIRS: FieldArgs = FieldArgs { at: 2, step: 2 };
}

/// Where the keys are in the argument vector, as Redis's legacy (first, last, step) triple:
/// `last` < 0 counts from the end; `first` = 0 means no keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeySpec {
    pub first: i32,
    pub last: i32,
    pub step: i32,
}

impl KeySpec {
    pub const NONE: KeySpec = KeySpec {
        first: 0,
        last: 0,
        step: 0,
    };
    pub const ONE: KeySpec = KeySpec {
        first: 1,
        last: 1,
        step: 1,
    };
    pub const ALL: KeySpec = KeySpec {
        first: 1,
        last: -1,
        step: 1,
    };
    pub const PAIRS: KeySpec = KeySpec {
        first: 1,
        last: -1,
        step: 2,
    };
    /// Every key but the last argument (BLPOP key [key ...] timeout).
    pub const ALL_BUT_LAST: KeySpec = KeySpec {
        first: 1,
        last: -2,
        step: 1,
    };
    pub const TWO: KeySpec = KeySpec {
        first: 1,
        last: 2,
        step: 1,
    };

    /// Positions of the keys in `argc` arguments.
    pub fn positions(self, argc: usize) -> impl Iterator<Item = usize> {
        let first = self.first.max(0) as usize;
        let last = if self.last < 0 {
            argc as i64 + self.last as i64
        } else {
            self.last as i64
        };
        let last = if self.first == 0 {
            -1
        } else {
            last.min(argc as i64 - 1)
        };
        let step = self.step.max(1) as usize;
        (first..=(last.max(0) as usize))
            .step_by(step)
            .filter(move |_| last >= first as i64 && first > 0)
    }
}

/// What a command does inside MULTI, besides Redis's `no_multi` refusal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InMulti {
    /// Queued, run by EXEC (most commands).
    Queued,
    /// Runs at once, never queued (MULTI, DISCARD, WATCH, QUIT, RESET).
    RunsNow,
    /// EXEC: runs at once, and a rejection of it (arity, auth, cluster) discards the transaction
    /// with EXECABORT, as Redis's `rejectCommand`.
    Exec,
}

/// An argument that names another database than the session's (EXEC locks the keys a queued
/// command touches in the database it will run in).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DbRef {
    /// SELECT: the argument at this index is the database of the commands after it.
    Selects(usize),
    /// MOVE, COPY ... DB: the key at index `key` is also written in database `db` (an index).
    KeyIn { key: usize, db: usize },
}

/// Finds the [`DbRef`]s in a command's arguments.
pub type DbRefsFn = fn(&Args) -> Vec<DbRef>;

/// Finds the key positions of a command whose keys move (a `numkeys` argument, keys before a
/// timeout ...): given the whole argument vector, the indexes of its keys.
pub type KeysFn = fn(&Args) -> Vec<usize>;

/// Key positions of `numkeys` keys following a count at index `at` (LMPOP, ZUNION, SINTERCARD
/// ...): `at + 1 ..= at + numkeys`, clamped to the arguments present; none if the count is not a
/// positive integer (the handler reports that error).
pub fn keys_after_count(args: &Args, at: usize) -> Vec<usize> {
    let n = args
        .get(at)
        .and_then(|a| kvik_resp::parse_i64(a))
        .filter(|n| *n > 0)
        .unwrap_or(0) as usize;
    let end = (at + n).min(args.len().saturating_sub(1));
    (at + 1..=end).collect()
}

/// A command of a collection family (hash, list, set, sorted set): its ACL categories and COMMAND
/// DOCS group, and, for writes, [`CacheEffect::Invalidate`] (any write of a collection puts its
/// meta record, which drops a cached copy).
pub const fn collection_command(
    group: &'static str,
    name: &'static str,
    arity: i32,
    flags: Flags,
    keys: KeySpec,
    handler: Handler,
    acl: &'static [&'static str],
) -> CommandSpec {
    let spec = CommandSpec::new(name, arity, flags, keys, handler)
        .acl(acl)
        .group(group);
    if flags.contains(Flags::WRITE) {
        spec.cache(CacheEffect::Invalidate)
    } else {
        spec
    }
}

/// Keys after a `numkeys` count at index 1 (LMPOP, ZMPOP, SINTERCARD, ZUNION ...).
pub fn numkeys_at_1(args: &Args) -> Vec<usize> {
    keys_after_count(args, 1)
}

/// Keys after a `numkeys` count at index 2 (BLMPOP, BZMPOP: the timeout comes first).
pub fn numkeys_at_2(args: &Args) -> Vec<usize> {
    keys_after_count(args, 2)
}

/// Handler of a container (CONFIG, CLIENT ...): never called, the dispatcher runs the
/// subcommand's handler instead.
pub fn container(_: &mut Ctx<'_>, _: &Args) -> CmdResult {
    Err(crate::error::CmdError::syntax())
}

/// Signature of a command handler: it reads `args` (args[0] is the command name), does the work,
/// and writes exactly one reply into `ctx.out`, or returns an error that the dispatcher renders
/// (discarding anything half-written).
pub type Handler = fn(&mut Ctx<'_>, &Args) -> CmdResult;

/// One command (or subcommand) of the table.
#[derive(Debug)]
pub struct CommandSpec {
    /// Lowercase name; for subcommands, the subcommand's own name ("get" of CONFIG GET).
    pub name: &'static str,
    /// Redis arity: N means exactly N arguments including the name, -N means at least N.
    pub arity: i32,
    pub flags: Flags,
    pub keys: KeySpec,
    /// For commands with [`Flags::MOVABLE_KEYS`]: finds the keys in the arguments; `keys` then
    /// only tells COMMAND INFO the legacy triple.
    pub keys_fn: Option<KeysFn>,
    /// How the command changes the hot cache; every write declares one (see [`CacheEffect`]).
    pub cache: CacheEffect,
    /// For a hash command that looks its fields up among a big hash's cached fields (the
    /// reads HGET, HMGET, HEXISTS, HSTRLEN; the writes, for the fields' old values and their
    /// update): where its field arguments are, so a run can prefetch their entries
    /// (`cmd::prefetch_run`); [`FieldArgs::NONE`] for every other command.
    pub fields: FieldArgs,
    /// Run to completion: the handler that answers the command on the I/O thread when the hot
    /// cache holds every key it reads (read-only and cheap; see [`super::cached`]).
    pub rtc: Option<RtcHandler>,
    /// Run to completion for a write: the I/O thread runs the worker handler itself in
    /// [`super::ctx::Mode::NoWait`] (tried locks, no write stalls, disk reads while fast), and
    /// hands the command to the pool only if something would wait. For writes whose work is a
    /// memtable insert (SET, INCR, HSET, SADD ...); their handlers go through `Ctx::lock_keys`,
    /// `Ctx::commit` (or `CollWrite`) and the `Ctx` reads, and make no key ready for blocked
    /// clients.
    pub rtc_write: bool,
    /// Run to completion for a read the hot cache cannot answer (bitmap segments, sorted sets,
    /// streams), whose data a hot key keeps in RocksDB's memtables and block cache: the I/O
    /// thread runs its worker handler in [`super::ctx::Mode::NoWait`] as for
    /// [`CommandSpec::rtc_write`] (under the same `rtc-write` switch), after the hot cache
    /// missed if it has an [`CommandSpec::rtc`] handler too.
    pub rtc_nowait_read: bool,
    /// Touches no key and never waits (connection and introspection commands: PING, HELLO,
    /// AUTH, SELECT, CLIENT SETINFO, INFO, CONFIG GET ...): the I/O thread runs its worker
    /// handler itself, whatever the run-to-completion switches say, so that a client can
    /// connect, identify itself and be watched while every worker waits out a write stall.
    /// Not counted in INFO's `rtc_commands` (INFO would count itself).
    pub io_thread: bool,
    /// A script (EVAL, EVALSHA, FCALL and their _RO forms) the I/O thread may run itself
    /// (`rtc-scripts`): its handler locks the declared keys by trying, runs only commands that
    /// are themselves run to completion, buffers its writes (`storage::txn`) and gives up,
    /// having changed nothing, when anything would wait or it runs past its time budget; the
    /// pool then runs it from the start (see `cmd::script`).
    pub rtc_script: bool,
    /// For a read with an [`CommandSpec::rtc`] handler: when the hot cache misses, the I/O
    /// thread runs the worker handler in [`super::ctx::Mode::NoWait`] before handing the
    /// command to the pool, so a read RocksDB answers from memory (memtables, block cache)
    /// costs no hand-off. For handlers that read through the `Ctx` reads only.
    pub rtc_storage: bool,
    /// Queued inside MULTI or run at once.
    pub in_multi: InMulti,
    /// How cluster mode routes it (by its keys, or ASKING / RESTORE-ASKING / MIGRATE / SELECT's
    /// own rule).
    pub routing: Routing,
    /// Arguments naming another database (SELECT, MOVE, COPY ... DB), for EXEC's locks.
    pub db_refs: Option<DbRefsFn>,
    /// ACL categories, without '@' (COMMAND INFO prints them with it).
    pub acl: &'static [&'static str],
    /// COMMAND DOCS group ("string", "generic", "connection", "server", ...).
    pub group: &'static str,
    pub summary: &'static str,
    pub since: &'static str,
    pub complexity: &'static str,
    pub handler: Handler,
    /// Subcommands; when non-empty, `handler` is only called for a known subcommand's spec.
    pub subcommands: &'static [CommandSpec],
    /// The keyspace events (`notify-keyspace-events`) the handler may emit, with Redis's class
    /// and name; every write declares its events, or [`CommandSpec::no_events`]. See
    /// [`CommandSpec::event`].
    pub events: [Option<Event>; MAX_EVENTS],
    /// A write that emits no keyspace event, as in Redis (FLUSHDB, SWAPDB ...).
    pub silent: bool,
    /// Allowed while a RESP2 client is subscribed ((P|S)SUBSCRIBE, (P|S)UNSUBSCRIBE, PING, QUIT,
    /// RESET); any other command gets Redis's "only ... are allowed in this context" error.
    pub in_subscribe: bool,
}

impl CommandSpec {
    /// A spec with the common defaults: no cache effect, group "generic", no docs, no
    /// subcommands. Chain the `const fn` setters below to fill in the rest.
    pub const fn new(
        name: &'static str,
        arity: i32,
        flags: Flags,
        keys: KeySpec,
        handler: Handler,
    ) -> CommandSpec {
        CommandSpec {
            name,
            arity,
            flags,
            keys,
            keys_fn: None,
            cache: CacheEffect::None,
            fields: FieldArgs::NONE,
            rtc: None,
            rtc_write: false,
            rtc_nowait_read: false,
            io_thread: false,
            rtc_script: false,
            rtc_storage: false,
            in_multi: InMulti::Queued,
            routing: Routing::Keys,
            db_refs: None,
            acl: &[],
            group: "generic",
            summary: "",
            since: "1.0.0",
            complexity: "O(1)",
            handler,
            subcommands: &[],
            events: [None; MAX_EVENTS],
            silent: false,
            in_subscribe: false,
        }
    }
    /// Declares a keyspace event the command emits: `class` is the `notify-keyspace-events`
    /// letter that enables it, `name` Redis's event name. Chain one call per event
    /// (`.event(Class::List, "lpop").event(Class::Generic, "del")`); the handler emits them
    /// with `Ctx::notify(class, name, key)` after its write committed, under the key's lock.
    /// A table test fails for any write command that declares nothing.
    pub const fn event(mut self, class: Class, name: &'static str) -> CommandSpec {
        let mut i = 0;
        while i < MAX_EVENTS {
            if self.events[i].is_none() {
                self.events[i] = Some(Event { class, name });
                return self;
            }
            i += 1;
        }
        panic!("too many events for one command");
    }
    /// Declares a write that emits no keyspace event (Redis emits none for it either).
    pub const fn no_events(mut self) -> CommandSpec {
        self.silent = true;
        self
    }
    /// Allows the command while a RESP2 client is subscribed (see [`CommandSpec::in_subscribe`]).
    pub const fn in_subscribe(mut self) -> CommandSpec {
        self.in_subscribe = true;
        self
    }
    /// True if the spec declares event `name` of `class`.
    pub fn declares(&self, class: Class, name: &str) -> bool {
        self.events
            .iter()
            .flatten()
            .any(|e| e.class == class && e.name == name)
    }
    pub const fn cache(mut self, cache: CacheEffect) -> CommandSpec {
        self.cache = cache;
        self
    }
    /// Where its hash field arguments are (see [`CommandSpec::fields`]).
    pub const fn fields(mut self, fields: FieldArgs) -> CommandSpec {
        self.fields = fields;
        self
    }
    /// Makes the command run-to-completion with `handler` (see [`CommandSpec::rtc`]).
    pub const fn rtc(mut self, handler: RtcHandler) -> CommandSpec {
        self.rtc = Some(handler);
        self
    }
    /// Makes a write run-to-completion (see [`CommandSpec::rtc_write`]).
    pub const fn rtc_write(mut self) -> CommandSpec {
        self.rtc_write = true;
        self
    }
    /// Runs a read on the I/O thread when RocksDB has its data in memory (see
    /// [`CommandSpec::rtc_nowait_read`]).
    pub const fn rtc_nowait_read(mut self) -> CommandSpec {
        self.rtc_nowait_read = true;
        self
    }
    /// Answers the command on the I/O thread (see [`CommandSpec::io_thread`]).
    pub const fn io_thread(mut self) -> CommandSpec {
        self.io_thread = true;
        self
    }
    /// Lets the I/O thread try a script (see [`CommandSpec::rtc_script`]).
    pub const fn rtc_script(mut self) -> CommandSpec {
        self.rtc_script = true;
        self
    }
    /// Lets a cached read that missed try RocksDB's memory on the I/O thread (see
    /// [`CommandSpec::rtc_storage`]).
    pub const fn rtc_storage(mut self) -> CommandSpec {
        self.rtc_storage = true;
        self
    }
    pub const fn in_multi(mut self, in_multi: InMulti) -> CommandSpec {
        self.in_multi = in_multi;
        self
    }
    pub const fn routing(mut self, routing: Routing) -> CommandSpec {
        self.routing = routing;
        self
    }
    pub const fn db_refs(mut self, f: DbRefsFn) -> CommandSpec {
        self.db_refs = Some(f);
        self
    }
    pub const fn acl(mut self, acl: &'static [&'static str]) -> CommandSpec {
        self.acl = acl;
        self
    }
    pub const fn group(mut self, group: &'static str) -> CommandSpec {
        self.group = group;
        self
    }
    /// COMMAND DOCS fields: summary, since (Redis version), complexity.
    pub const fn doc(
        mut self,
        summary: &'static str,
        since: &'static str,
        complexity: &'static str,
    ) -> CommandSpec {
        self.summary = summary;
        self.since = since;
        self.complexity = complexity;
        self
    }
    /// Keys found by `f` rather than by the (first, last, step) triple; sets MOVABLE_KEYS.
    pub const fn movable(mut self, f: KeysFn) -> CommandSpec {
        self.keys_fn = Some(f);
        self.flags = self.flags.union(Flags::MOVABLE_KEYS);
        self
    }
    pub const fn subs(mut self, subcommands: &'static [CommandSpec]) -> CommandSpec {
        self.subcommands = subcommands;
        self
    }

    /// The positions of the keys in `args` (locks, cluster slots, COMMAND GETKEYS, EXEC).
    pub fn key_positions(&self, args: &Args) -> Vec<usize> {
        match self.keys_fn {
            Some(f) => f(args),
            None => self.keys.positions(args.len()).collect(),
        }
    }

    /// True if `argc` arguments satisfy the arity.
    pub fn arity_ok(&self, argc: usize) -> bool {
        let a = self.arity;
        (a >= 0 && argc == a as usize) || (a < 0 && argc >= (-a) as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_positions_follow_first_last_step() {
        let v: Vec<usize> = KeySpec::ONE.positions(2).collect();
        assert_eq!(v, vec![1]);
        let v: Vec<usize> = KeySpec::ALL.positions(4).collect();
        assert_eq!(v, vec![1, 2, 3]);
        let v: Vec<usize> = KeySpec::PAIRS.positions(5).collect();
        assert_eq!(v, vec![1, 3]);
        assert_eq!(KeySpec::NONE.positions(3).count(), 0);
        assert_eq!(KeySpec::ONE.positions(1).count(), 0);
    }

    #[test]
    fn keys_after_a_count_are_clamped() {
        let args: Vec<bytes::Bytes> = ["lmpop", "2", "a", "b", "left"]
            .iter()
            .map(|s| bytes::Bytes::from(*s))
            .collect();
        assert_eq!(keys_after_count(&args, 1), vec![2, 3]);
        let mut bad = args.clone();
        bad[1] = "9".into();
        assert_eq!(keys_after_count(&bad, 1), vec![2, 3, 4]);
        bad[1] = "x".into();
        assert!(keys_after_count(&bad, 1).is_empty());
    }
}
