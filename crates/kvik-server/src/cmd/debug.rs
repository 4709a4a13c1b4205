//! DEBUG: the subcommands tools and test suites use, off by default as in Redis 7
//! (`enable-debug-command no|yes|local`, set at start).
//!
//! kvik answers the ones that mean something for it (SLEEP, SET-ACTIVE-EXPIRE, OBJECT,
//! POPULATE, LOG, ERROR, LISTPACK / QUICKLIST on the encoding OBJECT ENCODING reports) and
//! accepts Redis's tuning knobs and test hooks with their reply and no effect
//! (QUICKLIST-PACKED-THRESHOLD, SET-SKIP-CHECKSUM-VALIDATION, PAUSE-CRON, REPLYBUFFER,
//! CHANGE-REPL-ID, RELOAD: kvik's data is always on disk, so there is nothing to reload).
//! The rest are unknown subcommands.

use super::ctx::{Args, CmdError, CmdResult, Ctx};
use super::spec::{CommandSpec, Flags, KeySpec};
use crate::config::Param;
use crate::server::Server;
use crate::session::Session;
use crate::storage::encoding::Meta;
use crate::storage::Batch;
use std::time::Duration;

pub static COMMANDS: &[CommandSpec] = &[CommandSpec::new(
    "debug",
    -2,
    Flags::ADMIN
        .union(Flags::NOSCRIPT)
        .union(Flags::LOADING)
        .union(Flags::STALE)
        .union(Flags::PROTECTED),
    KeySpec::NONE,
    debug,
)
.acl(&["admin", "slow", "dangerous"])
.group("server")
.doc(
    "A container for debugging commands.",
    "1.0.0",
    "Depends on subcommand.",
)];

type Sub = fn(&mut Ctx<'_>, &Args) -> CmdResult;

/// Subcommand, argument count (with DEBUG and the subcommand: `n` exactly, `-n` at least,
/// as command arity) and handler.
const SUBCOMMANDS: &[(&str, i32, Sub)] = &[
    ("help", 2, help),
    ("sleep", 3, sleep),
    ("set-active-expire", 3, set_active_expire),
    ("object", 3, object),
    ("populate", -3, populate),
    ("log", 3, log),
    ("error", 3, error),
    ("listpack", 3, listpack),
    ("quicklist", -3, quicklist),
    ("quicklist-packed-threshold", 3, packed_threshold),
    ("set-skip-checksum-validation", 3, ok),
    ("pause-cron", 3, ok),
    ("replybuffer", 4, ok),
    ("change-repl-id", 2, ok),
    ("reload", -2, reload),
    ("io-threads-active", 3, io_threads_active),
];

/// The dispatcher's refusal of a PROTECTED command `enable-debug-command` does not allow.
pub(super) const NOT_ALLOWED: CmdError = CmdError::fixed("DEBUG command not allowed. If the enable-debug-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.");

/// Whether `enable-debug-command` lets this client run DEBUG.
pub(super) fn allowed(server: &Server, session: &Session) -> bool {
    let setting = Param::lookup("enable-debug-command")
        .map(|p| p.get(&server.config))
        .unwrap_or_default();
    match setting.as_str() {
        "yes" => true,
        "local" => {
            let addr = &session.client.addr;
            addr.starts_with("127.") || addr.starts_with("[::1]") || addr.starts_with("::1")
        }
        _ => false,
    }
}

/// DEBUG subcommand ...: the dispatcher already checked `enable-debug-command` (PROTECTED).
fn debug(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let name = String::from_utf8_lossy(&args[1]).into_owned();
    let argc = args.len() as i32;
    let sub = SUBCOMMANDS.iter().find(|(n, arity, _)| {
        n.eq_ignore_ascii_case(&name) && (argc == *arity || (*arity < 0 && argc >= -arity))
    });
    match sub {
        Some((_, _, handler)) => handler(ctx, args),
        None => Err(CmdError::err(format_args!(
            "unknown subcommand or wrong number of arguments for '{name}'. Try DEBUG HELP."
        ))),
    }
}

/// DEBUG IO-THREADS-ACTIVE count: holds the number of I/O threads that take connections
/// (`net::balance`); connections move at the end of their threads' next turns.
fn io_threads_active(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let n = std::str::from_utf8(&args[2])
        .ok()
        .and_then(|s| s.parse::<usize>().ok())
        .ok_or(CmdError::not_integer())?;
    if let Some(balance) = ctx.server.io_balance.get() {
        balance.pin(n);
    }
    ctx.out.ok();
    Ok(())
}

fn ok(ctx: &mut Ctx<'_>, _args: &Args) -> CmdResult {
    ctx.out.ok();
    Ok(())
}

fn help(ctx: &mut Ctx<'_>, _args: &Args) -> CmdResult {
    super::admin::help_reply(
        ctx.out,
        "DEBUG",
        &[
            "CHANGE-REPL-ID",
            "    Accepted; kvik has no replication IDs to change.",
            "ERROR <string>",
            "    Return a Redis protocol error with <string> as message.",
            "IO-THREADS-ACTIVE <count>",
            "    Hold the number of I/O threads taking connections at <count> (0: the load",
            "    decides again, as io-threads-adaptive says).",
            "LISTPACK <key>",
            "    Check that <key> would be listpack encoded (nothing is printed).",
            "LOG <message>",
            "    Write <message> to the server log.",
            "OBJECT <key>",
            "    Show low level info about `key` and associated value.",
            "PAUSE-CRON <0|1>",
            "    Accepted, no effect.",
            "POPULATE <count> [<prefix>] [<size>]",
            "    Create <count> string keys named key:<num>. If <prefix> is specified then",
            "    it is used instead of the 'key' prefix.",
            "QUICKLIST <key> [<0|1>]",
            "    Check that <key> would be quicklist encoded (nothing is printed).",
            "QUICKLIST-PACKED-THRESHOLD <size>",
            "    Accepted, no effect: kvik stores list elements as RocksDB records.",
            "RELOAD [option ...]",
            "    Accepted, no effect: kvik's data is always on disk.",
            "REPLYBUFFER PEAK-RESET-TIME <NEVER||RESET|time> | RESIZING <0|1>",
            "    Accepted, no effect.",
            "SET-ACTIVE-EXPIRE <0|1>",
            "    Setting it to 0 disables expiring keys in background when they are not",
            "    accessed. Setting it to 1 reenables back the default.",
            "SET-SKIP-CHECKSUM-VALIDATION <0|1>",
            "    Accepted, no effect: RESTORE payloads are always checked.",
            "SLEEP <seconds>",
            "    Stop this connection for <seconds>. Decimals allowed.",
        ],
    );
    Ok(())
}

/// C's `atof`/`atoi` as Redis reads these arguments: the longest numeric prefix, else 0.
fn lenient_f64(arg: &[u8]) -> f64 {
    let s = String::from_utf8_lossy(arg);
    let s = s.trim_start();
    (1..=s.len())
        .rev()
        .find_map(|n| s.get(..n).and_then(|p| p.parse::<f64>().ok()))
        .filter(|v| v.is_finite())
        .unwrap_or(0.0)
}

/// DEBUG SLEEP: Redis stops the whole server; kvik stops only this connection's worker.
fn sleep(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let secs = lenient_f64(&args[2]).max(0.0);
    std::thread::sleep(Duration::from_secs_f64(secs.min(1e9)));
    ctx.out.ok();
    Ok(())
}

fn set_active_expire(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let on = lenient_f64(&args[2]) as i64 != 0;
    ctx.server
        .config
        .active_expire
        .store(on, std::sync::atomic::Ordering::Relaxed);
    ctx.out.ok();
    Ok(())
}

/// DEBUG OBJECT: Redis's line, with what kvik knows: the encoding OBJECT ENCODING reports, the
/// value's stored length as `serializedlength`, and no LRU clock (0: every key looks just used).
fn object(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let key = &args[2];
    let Some(encoding) = super::keys::encoding_of(ctx, key)? else {
        return Err(CmdError::fixed("no such key"));
    };
    let meta = ctx.lookup_read(key)?;
    let len = meta.as_ref().map_or(0, |m| {
        if m.is_collection() {
            m.len
        } else {
            m.value.len() as u64
        }
    });
    ctx.out.simple(&format!(
        "Value at:0x0 refcount:1 encoding:{encoding} serializedlength:{len} lru:0 lru_seconds_idle:0"
    ));
    Ok(())
}

/// Keys POPULATE writes per batch.
const POPULATE_CHUNK: u64 = 1000;

/// DEBUG POPULATE count [prefix] [size]: string keys `<prefix>:<n>` holding `value:<n>`
/// (padded with zero bytes or cut to `size`); existing keys are left alone, as in Redis.
fn populate(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    if args.len() > 5 {
        return Err(CmdError::syntax());
    }
    let count = kvik_resp::parse_i64(&args[2])
        .filter(|n| *n >= 0)
        .ok_or(CmdError::fixed("value is out of range, must be positive"))? as u64;
    let prefix = args.get(3).map_or(&b"key"[..], |p| &p[..]);
    let size = match args.get(4) {
        None => None,
        Some(a) => Some(
            kvik_resp::parse_i64(a)
                .filter(|n| *n >= 0)
                .ok_or(CmdError::fixed("value is out of range, must be positive"))?
                as usize,
        ),
    };
    let storage = ctx.storage();
    let db = ctx.db();
    let mut from = 0;
    while from < count {
        let to = (from + POPULATE_CHUNK).min(count);
        let keys: Vec<Vec<u8>> = (from..to)
            .map(|n| {
                let mut k = prefix.to_vec();
                k.extend_from_slice(format!(":{n}").as_bytes());
                k
            })
            .collect();
        let _guard = storage.lock(db, &keys);
        let mut batch = Batch::default();
        for (n, key) in (from..to).zip(&keys) {
            if ctx.lookup_write(key)?.is_some() {
                continue;
            }
            let mut value = format!("value:{n}").into_bytes();
            if let Some(size) = size {
                value.resize(size, 0);
            }
            batch.put_meta(storage, db, key, &Meta::string(value, 0));
        }
        storage.commit(batch)?;
        from = to;
    }
    ctx.out.ok();
    Ok(())
}

fn log(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    tracing::warn!("DEBUG LOG: {}", String::from_utf8_lossy(&args[2]));
    ctx.out.ok();
    Ok(())
}

/// DEBUG ERROR text: the error `text`, with `ERR ` in front unless it names its own code
/// (a leading `-`), as Redis's addReplyError.
fn error(_ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let text = String::from_utf8_lossy(&args[2]);
    Err(match text.strip_prefix('-') {
        Some(line) => CmdError::from_line(line),
        None => CmdError::err(text),
    })
}

/// LISTPACK / QUICKLIST key: Redis prints the structure on its stdout; kvik checks the
/// encoding OBJECT ENCODING reports and prints nothing.
fn encoded_as(ctx: &mut Ctx<'_>, key: &[u8], want: &str, what: &str) -> CmdResult {
    match super::keys::encoding_of(ctx, key)? {
        None => Err(CmdError::fixed("no such key")),
        Some(e) if e == want => {
            ctx.out
                .simple(&format!("{what} structure printed on stdout"));
            Ok(())
        }
        Some(_) => Err(CmdError::err(format_args!("Not a {want} encoded object."))),
    }
}

fn listpack(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    encoded_as(ctx, &args[2], "listpack", "Listpack")
}

fn quicklist(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    if args.len() > 4 {
        return Err(CmdError::err(
            "unknown subcommand or wrong number of arguments for 'quicklist'. Try DEBUG HELP.",
        ));
    }
    encoded_as(ctx, &args[2], "quicklist", "Quicklist")
}

/// QUICKLIST-PACKED-THRESHOLD size: checked as Redis checks it, then ignored.
fn packed_threshold(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let valid = std::str::from_utf8(&args[2])
        .ok()
        .and_then(|s| crate::config::parse_memory(s).ok())
        .is_some_and(|n| n <= 1 << 32);
    if !valid {
        return Err(CmdError::fixed(
            "argument must be a memory value bigger than 1 and smaller than 4gb",
        ));
    }
    ctx.out.ok();
    Ok(())
}

/// RELOAD [MERGE] [NOFLUSH] [NOSAVE]: Redis saves and loads its RDB back; kvik's data is
/// always on disk and never loaded, so there is nothing to do.
fn reload(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    for opt in &args[2..] {
        let known = [&b"merge"[..], b"noflush", b"nosave"]
            .iter()
            .any(|o| opt.eq_ignore_ascii_case(o));
        if !known {
            return Err(CmdError::fixed(
                "DEBUG RELOAD only supports the MERGE, NOFLUSH and NOSAVE options.",
            ));
        }
    }
    ctx.out.ok();
    Ok(())
}
