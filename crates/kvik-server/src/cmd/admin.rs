//! Server administration commands: INFO COMMAND CONFIG DBSIZE FLUSHDB FLUSHALL TIME SHUTDOWN
//! SLOWLOG (CLIENT lives in `client`).
//!
//! COMMAND's replies are derived from the command table alone (the specs' arity, flags, key
//! positions, ACL categories and docs), so a command added to the table shows up in COMMAND,
//! COMMAND INFO / DOCS / LIST / COUNT / GETKEYS without anything else to update.
//!
//! INFO, COMMAND, CONFIG GET, DBSIZE and TIME are answered on the I/O thread (`io_thread`), so a
//! monitoring agent is served while every worker waits out a write stall.

use super::ctx::{Args, CmdError, CmdResult, Ctx, Reply};
use super::spec::{CacheEffect, CommandSpec, Flags, KeySpec};
use super::{table, CommandTable, Entry};
use crate::config::{self, Param};
use crate::stats::info;

const LOADING_STALE: Flags = Flags::LOADING.union(Flags::STALE);
const ADMIN_SUB: Flags = Flags::ADMIN
    .union(Flags::NOSCRIPT)
    .union(Flags::LOADING)
    .union(Flags::STALE);
const SLOWLOG_SUB: Flags = Flags::ADMIN.union(Flags::LOADING).union(Flags::STALE);
const ADMIN_ACL: &[&str] = &["admin", "slow", "dangerous"];
const CMD_ACL: &[&str] = &["slow", "connection"];

static COMMAND_SUBS: &[CommandSpec] = &[
    CommandSpec::new("count", 2, LOADING_STALE, KeySpec::NONE, command_count)
        .io_thread()
        .acl(CMD_ACL)
        .group("server")
        .doc("Returns a count of commands.", "2.8.13", "O(1)"),
    CommandSpec::new("docs", -2, LOADING_STALE, KeySpec::NONE, command_docs)
        .io_thread()
        .acl(CMD_ACL)
        .group("server")
        .doc(
            "Returns documentary information about one, multiple or all commands.",
            "7.0.0",
            "O(N) where N is the number of commands to look up",
        ),
    CommandSpec::new("getkeys", -4, LOADING_STALE, KeySpec::NONE, command_getkeys)
        .acl(CMD_ACL)
        .group("server")
        .doc(
            "Extracts the key names from an arbitrary command.",
            "2.8.13",
            "O(N) where N is the number of arguments to the command",
        ),
    CommandSpec::new(
        "getkeysandflags",
        -4,
        LOADING_STALE,
        KeySpec::NONE,
        command_getkeys,
    )
    .acl(CMD_ACL)
    .group("server")
    .doc(
        "Extracts the key names and access flags for an arbitrary command.",
        "7.0.0",
        "O(N) where N is the number of arguments to the command",
    ),
    CommandSpec::new("help", 2, LOADING_STALE, KeySpec::NONE, command_help)
        .acl(CMD_ACL)
        .group("server")
        .doc(
            "Returns helpful text about the different subcommands.",
            "5.0.0",
            "O(1)",
        ),
    CommandSpec::new("info", -2, LOADING_STALE, KeySpec::NONE, command_info)
        .io_thread()
        .acl(CMD_ACL)
        .group("server")
        .doc(
            "Returns information about one, multiple or all commands.",
            "2.8.13",
            "O(N) where N is the number of commands to look up",
        ),
    CommandSpec::new("list", -2, LOADING_STALE, KeySpec::NONE, command_list)
        .io_thread()
        .acl(CMD_ACL)
        .group("server")
        .doc(
            "Returns a list of command names.",
            "7.0.0",
            "O(N) where N is the total number of Redis commands",
        ),
];

static CONFIG_SUBS: &[CommandSpec] = &[
    CommandSpec::new("get", -3, ADMIN_SUB, KeySpec::NONE, config_get)
        .io_thread()
        .acl(ADMIN_ACL)
        .group("server")
        .doc(
            "Returns the effective values of configuration parameters.",
            "2.0.0",
            "O(N) when N is the number of configuration parameters provided",
        ),
    CommandSpec::new("set", -4, ADMIN_SUB, KeySpec::NONE, config_set)
        .acl(ADMIN_ACL)
        .group("server")
        .doc(
            "Sets configuration parameters in-flight.",
            "2.0.0",
            "O(N) when N is the number of configuration parameters provided",
        ),
    CommandSpec::new("resetstat", 2, ADMIN_SUB, KeySpec::NONE, config_resetstat)
        .acl(ADMIN_ACL)
        .group("server")
        .doc("Resets the server's statistics.", "2.0.0", "O(1)"),
    CommandSpec::new("rewrite", 2, ADMIN_SUB, KeySpec::NONE, config_rewrite)
        .acl(ADMIN_ACL)
        .group("server")
        .doc(
            "Persists the effective configuration to file.",
            "2.8.0",
            "O(1)",
        ),
    CommandSpec::new("help", 2, LOADING_STALE, KeySpec::NONE, config_help)
        .acl(&["slow"])
        .group("server")
        .doc(
            "Returns helpful text about the different subcommands.",
            "5.0.0",
            "O(1)",
        ),
];

static SLOWLOG_SUBS: &[CommandSpec] = &[
    CommandSpec::new("get", -2, SLOWLOG_SUB, KeySpec::NONE, slowlog_get)
        .acl(ADMIN_ACL)
        .group("server")
        .doc(
            "Returns the slow log's entries.",
            "2.2.12",
            "O(N) where N is the number of entries returned",
        ),
    CommandSpec::new("len", 2, SLOWLOG_SUB, KeySpec::NONE, slowlog_len)
        .acl(ADMIN_ACL)
        .group("server")
        .doc(
            "Returns the number of entries in the slow log.",
            "2.2.12",
            "O(1)",
        ),
    CommandSpec::new("reset", 2, SLOWLOG_SUB, KeySpec::NONE, slowlog_reset)
        .acl(ADMIN_ACL)
        .group("server")
        .doc(
            "Clears all entries from the slow log.",
            "2.2.12",
            "O(N) where N is the number of entries in the slowlog",
        ),
    CommandSpec::new("help", 2, LOADING_STALE, KeySpec::NONE, slowlog_help)
        .acl(&["slow"])
        .group("server")
        .doc(
            "Show helpful text about the different subcommands",
            "6.2.0",
            "O(1)",
        ),
];

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::new("info", -1, LOADING_STALE, KeySpec::NONE, info_cmd)
        .io_thread()
        .acl(&["slow", "dangerous"])
        .group("server")
        .doc("Returns information and statistics about the server.", "1.0.0", "O(1)"),
    // COMMAND's handler answers plain `COMMAND` (every command) when the dispatcher runs a
    // container without a subcommand.
    CommandSpec::new("command", -1, LOADING_STALE, KeySpec::NONE, command_all)
        .io_thread()
        .acl(CMD_ACL)
        .group("server")
        .doc("Returns detailed information about all commands.", "2.8.13", "O(N) where N is the total number of Redis commands")
        .subs(COMMAND_SUBS),
    CommandSpec::new("config", -2, Flags::empty(), KeySpec::NONE, super::spec::container)
        .acl(&["slow"])
        .group("server")
        .doc("A container for server configuration commands.", "2.0.0", "Depends on subcommand.")
        .subs(CONFIG_SUBS),
    CommandSpec::new("dbsize", 1, Flags::READONLY.union(Flags::FAST), KeySpec::NONE, dbsize)
        .io_thread()
        .acl(&["keyspace", "read", "fast"])
        .group("server")
        .doc("Returns the number of keys in the database.", "1.0.0", "O(1)"),
    CommandSpec::new("flushdb", -1, Flags::WRITE, KeySpec::NONE, flushdb)
        .no_events()
        .cache(CacheEffect::Flush)
        .acl(&["keyspace", "write", "slow", "dangerous"])
        .group("server")
        .doc("Removes all keys from the current database.", "1.0.0", "O(N) where N is the number of keys in the selected database"),
    CommandSpec::new("flushall", -1, Flags::WRITE, KeySpec::NONE, flushall)
        .no_events()
        .cache(CacheEffect::Flush)
        .acl(&["keyspace", "write", "slow", "dangerous"])
        .group("server")
        .doc("Removes all keys from all databases.", "1.0.0", "O(N) where N is the total number of keys in all databases"),
    CommandSpec::new("time", 1, LOADING_STALE.union(Flags::FAST), KeySpec::NONE, time)
        .io_thread()
        .acl(&["fast"])
        .group("server")
        .doc("Returns the server time.", "2.6.0", "O(1)"),
    CommandSpec::new(
        "shutdown",
        -1,
        ADMIN_SUB.union(Flags::NO_MULTI).union(Flags::ALLOW_BUSY),
        KeySpec::NONE,
        shutdown,
    )
    .acl(ADMIN_ACL)
    .group("server")
    .doc("Synchronously saves the database(s) to disk and shuts down the Redis server.", "1.0.0", "O(N) when saving, where N is the total number of keys in all databases when saving data, otherwise O(1)"),
    CommandSpec::new("slowlog", -2, Flags::empty(), KeySpec::NONE, super::spec::container)
        .acl(&["slow"])
        .group("server")
        .doc("A container for slow log commands.", "2.2.12", "Depends on subcommand.")
        .subs(SLOWLOG_SUBS),
];

/// Writes Redis's HELP reply: the header line, then `lines`, then the HELP entry.
pub fn help_reply(out: &mut Reply, command: &str, lines: &[&str]) {
    out.array(lines.len() + 3);
    out.simple(&format!(
        "{command} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"
    ));
    for l in lines {
        out.simple(l);
    }
    out.simple("HELP");
    out.simple("    Prints this help.");
}

/// Redis's error for a subcommand called with arguments it does not take.
pub fn subcommand_syntax(args: &Args) -> CmdError {
    CmdError::err(format_args!(
        "unknown subcommand or wrong number of arguments for '{}'. Try {} HELP.",
        String::from_utf8_lossy(&args[1][..args[1].len().min(128)]),
        String::from_utf8_lossy(&args[0]).to_ascii_uppercase()
    ))
}

// ---- INFO -------------------------------------------------------------------------------------

fn info_cmd(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let sections: Vec<&[u8]> = args[1..].iter().map(|a| &a[..]).collect();
    let text = info::render(ctx.server, &sections);
    // RESP2: a bulk string; RESP3: a verbatim string of format "txt", as Redis 7.
    ctx.out.verbatim(text.as_bytes());
    Ok(())
}

// ---- COMMAND ----------------------------------------------------------------------------------

fn command_all(ctx: &mut Ctx<'_>, _args: &Args) -> CmdResult {
    let t = table();
    let all: Vec<&Entry> = t.top_level().collect();
    ctx.out.array(all.len());
    for e in all {
        write_command_info(ctx.out, t, e);
    }
    Ok(())
}

fn command_count(ctx: &mut Ctx<'_>, _args: &Args) -> CmdResult {
    ctx.out.int(table().top_level().count() as i64);
    Ok(())
}

/// Finds a command or subcommand by the name COMMAND INFO / DOCS accept: "get" or "config|get".
fn find_by_full_name<'t>(t: &'t CommandTable, name: &[u8]) -> Option<&'t Entry> {
    let mut parts = name.splitn(2, |&b| b == b'|');
    let top = t.lookup(parts.next()?)?;
    match parts.next() {
        None => Some(top),
        Some(sub) => t
            .subcommands(top)
            .find(|s| s.spec.name.as_bytes().eq_ignore_ascii_case(sub)),
    }
}

fn command_info(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    if args.len() == 2 {
        return command_all(ctx, args);
    }
    let t = table();
    ctx.out.array(args.len() - 2);
    for name in &args[2..] {
        match find_by_full_name(t, name) {
            Some(e) => write_command_info(ctx.out, t, e),
            None => ctx.out.null_array(),
        }
    }
    Ok(())
}

/// The key-spec flags of a command, derived from its command flags: readers access their keys,
/// writers read and update them. (Redis's specs say more, e.g. DEL's RM/delete and MSET's
/// OW/update; kvik's table records only the positions.)
fn key_spec_flags(spec: &CommandSpec) -> &'static [&'static str] {
    if spec.flags.contains(Flags::WRITE) {
        &["RW", "update"]
    } else if spec.flags.contains(Flags::READONLY) {
        &["RO", "access"]
    } else {
        &[]
    }
}

/// A key spec map of Redis 7: flags, begin_search {index}, find_keys {range}.
fn write_key_spec(out: &mut Reply, spec: &CommandSpec) {
    let ks = spec.keys;
    out.map(3);
    out.bulk(b"flags");
    let flags = key_spec_flags(spec);
    out.set(flags.len());
    for f in flags {
        out.simple(f);
    }
    out.bulk(b"begin_search");
    out.map(2);
    out.bulk(b"type");
    out.bulk(b"index");
    out.bulk(b"spec");
    out.map(1);
    out.bulk(b"index");
    out.int(ks.first as i64);
    out.bulk(b"find_keys");
    out.map(2);
    out.bulk(b"type");
    out.bulk(b"range");
    out.bulk(b"spec");
    out.map(3);
    out.bulk(b"lastkey");
    out.int(if ks.last < 0 {
        ks.last
    } else {
        ks.last - ks.first
    } as i64);
    out.bulk(b"keystep");
    out.int(ks.step as i64);
    out.bulk(b"limit");
    out.int(0);
}

/// One COMMAND INFO entry as Redis 7: name, arity, flags, first key, last key, step, ACL
/// categories, tips, key specs, subcommands.
fn write_command_info(out: &mut Reply, t: &CommandTable, e: &Entry) {
    let s = e.spec;
    out.array(10);
    out.bulk(e.full_name.as_bytes());
    out.int(s.arity as i64);
    let flags = s.flags.names();
    out.set(flags.len());
    for f in flags {
        out.simple(f);
    }
    out.int(s.keys.first as i64);
    out.int(s.keys.last as i64);
    out.int(s.keys.step as i64);
    out.set(s.acl.len());
    for c in s.acl {
        out.simple(&format!("@{c}"));
    }
    out.set(0); // tips
    if s.keys.first > 0 {
        out.set(1);
        write_key_spec(out, s);
    } else {
        out.set(0);
    }
    if s.subcommands.is_empty() {
        out.set(0);
    } else {
        out.array(s.subcommands.len());
        for sub in t.subcommands(e) {
            write_command_info(out, t, sub);
        }
    }
}

fn write_command_docs(out: &mut Reply, t: &CommandTable, e: &Entry) {
    let s = e.spec;
    out.bulk(e.full_name.as_bytes());
    let has_subs = !s.subcommands.is_empty();
    out.map(4 + usize::from(has_subs));
    out.bulk(b"summary");
    out.bulk(s.summary.as_bytes());
    out.bulk(b"since");
    out.bulk(s.since.as_bytes());
    out.bulk(b"group");
    out.bulk(s.group.as_bytes());
    out.bulk(b"complexity");
    out.bulk(s.complexity.as_bytes());
    if has_subs {
        out.bulk(b"subcommands");
        out.map(s.subcommands.len());
        for sub in t.subcommands(e) {
            write_command_docs(out, t, sub);
        }
    }
}

fn command_docs(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let t = table();
    let entries: Vec<&Entry> = if args.len() == 2 {
        t.top_level().collect()
    } else {
        args[2..]
            .iter()
            .filter_map(|n| find_by_full_name(t, n))
            .collect()
    };
    ctx.out.map(entries.len());
    for e in entries {
        write_command_docs(ctx.out, t, e);
    }
    Ok(())
}

/// COMMAND LIST [FILTERBY MODULE name | ACLCAT cat | PATTERN pattern]: every command and
/// subcommand name.
fn command_list(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let t = table();
    let all = (0..t.len()).map(|id| t.entry(id));
    let names: Vec<&str> = match args.len() {
        2 => all.map(|e| e.full_name.as_str()).collect(),
        5 if args[2].eq_ignore_ascii_case(b"filterby") => {
            let what = &args[4];
            if args[3].eq_ignore_ascii_case(b"module") {
                Vec::new() // no modules
            } else if args[3].eq_ignore_ascii_case(b"aclcat") {
                all.filter(|e| {
                    e.spec
                        .acl
                        .iter()
                        .any(|c| c.as_bytes().eq_ignore_ascii_case(what))
                })
                .map(|e| e.full_name.as_str())
                .collect()
            } else if args[3].eq_ignore_ascii_case(b"pattern") {
                let pattern = what.to_ascii_lowercase();
                all.filter(|e| crate::glob::matches(&pattern, e.full_name.as_bytes()))
                    .map(|e| e.full_name.as_str())
                    .collect()
            } else {
                return Err(CmdError::syntax());
            }
        }
        _ => return Err(CmdError::syntax()),
    };
    ctx.out.array(names.len());
    for n in names {
        ctx.out.bulk(n.as_bytes());
    }
    Ok(())
}

/// COMMAND GETKEYS / GETKEYSANDFLAGS command [arg ...].
fn command_getkeys(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let with_flags = args[1].eq_ignore_ascii_case(b"getkeysandflags");
    let t = table();
    let cmd = &args[2..];
    let invalid = || CmdError::err("Invalid command specified");
    let top = t.lookup(&cmd[0]).ok_or_else(invalid)?;
    let e = if !top.spec.subcommands.is_empty() && cmd.len() >= 2 {
        t.subcommands(top)
            .find(|s| s.spec.name.as_bytes().eq_ignore_ascii_case(&cmd[1]))
            .ok_or_else(invalid)?
    } else {
        top
    };
    if e.spec.keys.first == 0 && e.spec.keys_fn.is_none() {
        return Err(CmdError::err("The command has no key arguments"));
    }
    if !e.spec.arity_ok(cmd.len()) {
        return Err(CmdError::err(
            "Invalid number of arguments specified for command",
        ));
    }
    let positions = e.spec.key_positions(cmd);
    if positions.is_empty() && !e.spec.flags.contains(Flags::NO_MANDATORY_KEYS) {
        return Err(CmdError::err("Invalid arguments specified for command"));
    }
    let flags = key_spec_flags(e.spec);
    ctx.out.array(positions.len());
    for p in positions {
        if with_flags {
            ctx.out.array(2);
            ctx.out.bulk(&cmd[p]);
            ctx.out.set(flags.len());
            for f in flags {
                ctx.out.simple(f);
            }
        } else {
            ctx.out.bulk(&cmd[p]);
        }
    }
    Ok(())
}

fn command_help(ctx: &mut Ctx<'_>, _args: &Args) -> CmdResult {
    help_reply(
        ctx.out,
        "COMMAND",
        &[
            "(no subcommand)",
            "    Return details about all Redis commands.",
            "COUNT",
            "    Return the total number of commands in this Redis server.",
            "LIST",
            "    Return a list of all commands in this Redis server.",
            "INFO [<command-name> ...]",
            "    Return details about multiple Redis commands.",
            "    If no command names are given, documentation details for all",
            "    commands are returned.",
            "DOCS [<command-name> ...]",
            "    Return documentation details about multiple Redis commands.",
            "    If no command names are given, documentation details for all",
            "    commands are returned.",
            "GETKEYS <full-command>",
            "    Return the keys from a full Redis command.",
            "GETKEYSANDFLAGS <full-command>",
            "    Return the keys and the access flags from a full Redis command.",
        ],
    );
    Ok(())
}

// ---- CONFIG -----------------------------------------------------------------------------------

/// CONFIG GET pattern [pattern ...]: each matching parameter once (aliases are names of their
/// own, as in Redis 7.0), as a map (RESP3) or a flat name/value array (RESP2). Patterns are
/// globs matched without regard to case.
fn config_get(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let patterns = &args[2..];
    let matching: Vec<(&str, Param)> = Param::all()
        .filter(|(name, _)| {
            patterns
                .iter()
                .any(|p| crate::glob::matches_nocase(p, name.as_bytes()))
        })
        .collect();
    ctx.out.map(matching.len());
    for (name, p) in matching {
        ctx.out.bulk(name.as_bytes());
        ctx.out.bulk(p.get(&ctx.server.config).as_bytes());
    }
    Ok(())
}

/// CONFIG SET name value [name value ...]: all or nothing. Every name is checked (known,
/// mutable, not repeated) and every value validated on a scratch configuration before the first
/// one is applied, so a rejected call changes nothing. As Redis 7.0: an alias and its
/// parameter are not duplicates of each other (the last one wins); an unknown, immutable or
/// repeated name is quoted as the client wrote it, a bad value's name in lowercase.
fn config_set(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    if !args.len().is_multiple_of(2) {
        return Err(CmdError::syntax());
    }
    let failed = |name: &str, why: &str| {
        CmdError::err(format_args!(
            "CONFIG SET failed (possibly related to argument '{name}') - {why}"
        ))
    };
    let mut changes: Vec<(Param, String, String)> = Vec::new();
    for pair in args[2..].chunks(2) {
        let name = String::from_utf8_lossy(&pair[0]).into_owned();
        let Some(p) = Param::lookup(&name) else {
            return Err(CmdError::err(format_args!(
                "Unknown option or number of arguments for CONFIG SET - '{name}'"
            )));
        };
        if !p.mutable() {
            return Err(failed(&name, "can't set immutable config"));
        }
        let lower = name.to_ascii_lowercase();
        if changes.iter().any(|(_, n, _)| *n == lower) {
            return Err(failed(&name, "duplicate parameter"));
        }
        changes.push((p, lower, String::from_utf8_lossy(&pair[1]).into_owned()));
    }
    let scratch = config::Config::default();
    for (p, name, value) in &changes {
        p.set(&scratch, value).map_err(|why| failed(name, &why))?;
    }
    let config = &ctx.server.config;
    let previous: Vec<String> = changes.iter().map(|(p, _, _)| p.get(config)).collect();
    for (i, (p, name, value)) in changes.iter().enumerate() {
        if let Err(why) = p.set(config, value) {
            // Validated above, so only a setting whose check depends on the live state gets
            // here: put back what was already changed.
            for ((p, _, _), old) in changes[..i].iter().zip(&previous) {
                let _ = p.set(config, old);
            }
            return Err(failed(name, &why));
        }
    }
    for (p, _, _) in &changes {
        ctx.server.config_changed(p.name());
    }
    ctx.out.ok();
    Ok(())
}

fn config_resetstat(ctx: &mut Ctx<'_>, _args: &Args) -> CmdResult {
    // As Redis: counters, command and error statistics are reset; the slowlog is not.
    ctx.server.stats.reset();
    ctx.server.latency.reset_histograms();
    ctx.storage().cache().stats.reset();
    ctx.out.ok();
    Ok(())
}

/// CONFIG REWRITE: the running configuration back into the config file (see
/// `config::rewrite`), with Redis's errors.
fn config_rewrite(ctx: &mut Ctx<'_>, _args: &Args) -> CmdResult {
    let running = &ctx.server.config;
    let Some(path) = running.config_file.read().clone() else {
        return Err(CmdError::err("The server is running without a config file"));
    };
    if let Err(e) = config::rewrite::rewrite(&path, running) {
        tracing::warn!(error = %e, file = %path.display(), "CONFIG REWRITE failed");
        return Err(CmdError::err(format_args!(
            "Rewriting config file: {}",
            config::rewrite::error_text(&e)
        )));
    }
    tracing::info!(file = %path.display(), "CONFIG REWRITE executed with success");
    ctx.out.ok();
    Ok(())
}

fn config_help(ctx: &mut Ctx<'_>, _args: &Args) -> CmdResult {
    help_reply(
        ctx.out,
        "CONFIG",
        &[
            "GET <pattern>",
            "    Return parameters matching the glob-like <pattern> and their values.",
            "SET <directive> <value>",
            "    Set the configuration <directive> to <value>.",
            "RESETSTAT",
            "    Reset statistics reported by the INFO command.",
            "REWRITE",
            "    Rewrite the configuration file.",
        ],
    );
    Ok(())
}

// ---- keyspace: DBSIZE FLUSHDB FLUSHALL --------------------------------------------------------

fn dbsize(ctx: &mut Ctx<'_>, _args: &Args) -> CmdResult {
    ctx.out.int(ctx.storage().key_count(ctx.db()) as i64);
    Ok(())
}

/// FLUSHDB / FLUSHALL take an optional ASYNC or SYNC; both do the same range delete (it is
/// O(1) in RocksDB either way), and the space comes back by a background compaction.
fn flush_mode(args: &Args) -> CmdResult {
    match args.len() {
        1 => Ok(()),
        2 if args[1].eq_ignore_ascii_case(b"async") || args[1].eq_ignore_ascii_case(b"sync") => {
            Ok(())
        }
        _ => Err(CmdError::syntax()),
    }
}

fn flushdb(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    flush_mode(args)?;
    ctx.storage().flush_db(ctx.db())?;
    ctx.server.request_compaction();
    ctx.out.ok();
    Ok(())
}

fn flushall(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    flush_mode(args)?;
    ctx.storage().flush_all()?;
    ctx.server.request_compaction();
    ctx.out.ok();
    Ok(())
}

// ---- TIME SHUTDOWN ----------------------------------------------------------------------------

fn time(ctx: &mut Ctx<'_>, _args: &Args) -> CmdResult {
    let us = crate::clock::unix_us();
    ctx.out.array(2);
    ctx.out.bulk((us / 1_000_000).to_string().as_bytes());
    ctx.out.bulk((us % 1_000_000).to_string().as_bytes());
    Ok(())
}

/// SHUTDOWN [NOSAVE | SAVE] [NOW] [FORCE] [ABORT]. kvik has nothing to save: every write is
/// already in the WAL, which the server syncs on its way out. Like Redis, a successful SHUTDOWN
/// sends no reply; the client sees the connection close.
fn shutdown(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let (mut save, mut nosave, mut abort, mut other) = (false, false, false, false);
    for a in &args[1..] {
        if a.eq_ignore_ascii_case(b"nosave") {
            nosave = true;
        } else if a.eq_ignore_ascii_case(b"save") {
            save = true;
        } else if a.eq_ignore_ascii_case(b"now") || a.eq_ignore_ascii_case(b"force") {
            other = true;
        } else if a.eq_ignore_ascii_case(b"abort") {
            abort = true;
        } else {
            return Err(CmdError::syntax());
        }
    }
    if (save && nosave) || (abort && (save || nosave || other)) {
        return Err(CmdError::syntax());
    }
    if abort {
        return Err(CmdError::err("No shutdown in progress."));
    }
    tracing::info!(client = %ctx.session.client.addr, "user requested shutdown");
    ctx.server.request_shutdown();
    ctx.session.close_after_reply = true;
    Ok(())
}

// ---- SLOWLOG ----------------------------------------------------------------------------------

fn slowlog_get(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let count = match args.len() {
        2 => 10,
        3 => match kvik_resp::parse_i64(&args[2]) {
            Some(-1) => usize::MAX,
            Some(n) if n >= 0 => n as usize,
            _ => return Err(CmdError::err("count should be greater than or equal to -1")),
        },
        _ => return Err(subcommand_syntax(args)),
    };
    let entries = ctx.server.slowlog.get(count);
    let out = &mut *ctx.out;
    out.array(entries.len());
    for e in entries {
        out.array(7);
        out.int(e.id as i64);
        out.int(e.unix_secs as i64);
        out.int(e.micros as i64);
        out.array(e.args.len());
        for a in &e.args {
            out.bulk(a);
        }
        out.bulk(e.peer.as_bytes());
        out.bulk(e.name.as_bytes());
        // kvik's extra field: microseconds spent waiting for a worker (execution is field 3).
        out.int(e.queue_micros as i64);
    }
    Ok(())
}

fn slowlog_len(ctx: &mut Ctx<'_>, _args: &Args) -> CmdResult {
    ctx.out.int(ctx.server.slowlog.len() as i64);
    Ok(())
}

fn slowlog_reset(ctx: &mut Ctx<'_>, _args: &Args) -> CmdResult {
    ctx.server.slowlog.reset();
    ctx.out.ok();
    Ok(())
}

fn slowlog_help(ctx: &mut Ctx<'_>, _args: &Args) -> CmdResult {
    help_reply(
        ctx.out,
        "SLOWLOG",
        &[
            "GET [<count>]",
            "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
            "    Entries are made of:",
            "    id, timestamp, time in microseconds, arguments array, client IP and port,",
            "    client name",
            "LEN",
            "    Return the length of the slowlog.",
            "RESET",
            "    Reset the slowlog.",
        ],
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_names_find_subcommands() {
        let t = table();
        assert_eq!(
            find_by_full_name(t, b"CONFIG|get").unwrap().full_name,
            "config|get"
        );
        assert_eq!(find_by_full_name(t, b"info").unwrap().full_name, "info");
        assert!(find_by_full_name(t, b"config|nosuch").is_none());
        assert!(find_by_full_name(t, b"nosuch").is_none());
    }

    #[test]
    fn command_info_has_ten_fields() {
        let t = table();
        let mut out = Reply::new(kvik_resp::Proto::Resp2);
        write_command_info(&mut out, t, t.lookup(b"config").unwrap());
        assert!(out.buf.starts_with(b"*10\r\n$6\r\nconfig\r\n:-2\r\n*0\r\n:0\r\n:0\r\n:0\r\n*1\r\n+@slow\r\n*0\r\n*0\r\n*5\r\n"));
    }
}
