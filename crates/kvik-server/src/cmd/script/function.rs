//! FUNCTION LOAD / DELETE / FLUSH / RESTORE / DUMP / LIST / STATS / KILL / HELP, and FCALL,
//! FCALL_RO.
//!
//! A change of the libraries is made on this thread's functions engine under the shared
//! libraries lock, then published: its FUNCTION DUMP payload is written (synced) to an internal
//! RocksDB record, so functions survive a restart (startup loads it back, see
//! [`super::load_persisted`]), and the generation is bumped so every other thread rebuilds its
//! engine before its next FCALL.

use super::super::ctx::{Args, CmdError, CmdResult, Ctx};
use super::super::spec::{CommandSpec, Flags, KeySpec};
use super::engines::{self, Engines};
use super::host::Rules;
use super::{run, Target, SCRIPT_ACL};

const SCRIPT_WRITE_ACL: &[&str] = &["write", "slow", "scripting"];
use crate::scripting::{load_libraries, FUNCTIONS_RECORD};
use crate::server::Server;
use kvik_lua::{errors, FunctionEngine, RestorePolicy, ScriptFlags};
use std::sync::atomic::Ordering;

const fn sub(
    name: &'static str,
    arity: i32,
    flags: Flags,
    handler: super::super::spec::Handler,
    summary: &'static str,
    complexity: &'static str,
) -> CommandSpec {
    // Redis flags the subcommands that change the libraries `write` (kvik does not: they
    // change no key), and ACL rules see them in @write.
    let acl = match name.as_bytes() {
        b"load" | b"delete" | b"flush" | b"restore" => SCRIPT_WRITE_ACL,
        _ => SCRIPT_ACL,
    };
    CommandSpec::new(
        name,
        arity,
        flags.union(Flags::NOSCRIPT),
        KeySpec::NONE,
        handler,
    )
    .acl(acl)
    .group("scripting")
    .doc(summary, "7.0.0", complexity)
}

pub(super) static SUBS: &[CommandSpec] = &[
    sub(
        "load",
        -3,
        Flags::DENYOOM,
        load,
        "Creates a library.",
        "O(1) (considering compilation time is redundant)",
    ),
    sub(
        "delete",
        3,
        Flags::empty(),
        delete,
        "Deletes a library and its functions.",
        "O(1)",
    ),
    sub(
        "flush",
        -2,
        Flags::empty(),
        flush,
        "Deletes all libraries and functions.",
        "O(N) where N is the number of functions deleted",
    ),
    sub(
        "restore",
        -3,
        Flags::DENYOOM,
        restore,
        "Restores all libraries from a payload.",
        "O(N) where N is the number of functions on the payload",
    ),
    sub(
        "dump",
        2,
        Flags::empty(),
        dump,
        "Dumps all libraries into a serialized binary payload.",
        "O(N) where N is the number of functions",
    ),
    sub(
        "list",
        -2,
        Flags::empty(),
        list,
        "Returns information about all libraries.",
        "O(N) where N is the number of functions",
    ),
    sub(
        "stats",
        2,
        Flags::ALLOW_BUSY,
        stats,
        "Returns information about a function during execution.",
        "O(1)",
    ),
    sub(
        "kill",
        2,
        Flags::ALLOW_BUSY,
        kill,
        "Terminates a function during execution.",
        "O(1)",
    ),
    sub(
        "help",
        2,
        Flags::empty(),
        help,
        "Returns helpful text about the different subcommands.",
        "O(1)",
    ),
];

pub(super) fn fcall(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    fcall_generic(ctx, args, false)
}

pub(super) fn fcall_ro(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    fcall_generic(ctx, args, true)
}

fn fcall_generic(ctx: &mut Ctx<'_>, args: &Args, ro: bool) -> CmdResult {
    let server = ctx.server;
    engines::with(server, |eng| {
        let name = String::from_utf8_lossy(&args[1]).into_owned();
        let Some(info) = eng.functions.function(&name) else {
            return Err(CmdError::from_line(errors::FUNCTION_NOT_FOUND));
        };
        let flags = info.flags;
        let (keys, argv) = super::keys_and_args(args).map_err(|e| {
            CmdError::from_line(if e == errors::NOT_AN_INTEGER {
                errors::BAD_NUMKEYS
            } else {
                e
            })
        })?;
        if ro {
            flags.check_read_only().map_err(CmdError::from_line)?;
        }
        if server.cluster.node().is_some() && flags.contains(ScriptFlags::NO_CLUSTER) {
            return Err(CmdError::fixed(
                "Can not run function on cluster, 'no-cluster' flag is set.",
            ));
        }
        let rules = Rules {
            read_only: ro || flags.contains(ScriptFlags::NO_WRITES),
            cross_slot: flags.contains(ScriptFlags::ALLOW_CROSS_SLOT),
        };
        super::refuse_writes_without_replicas(server, flags, rules)?;
        run(ctx, eng, Target::Function(&name), &keys, &argv, rules, args)
    })
}

/// Applies `change` to the libraries (see the module's header) and returns its result.
fn change<R>(
    server: &Server,
    change: impl FnOnce(&mut FunctionEngine) -> Result<R, String>,
) -> Result<R, CmdError> {
    engines::with(server, |eng: &mut Engines| {
        let scripts = &server.scripts;
        let mut libs = scripts.libraries.lock();
        // Another thread may have changed them since `with` caught up.
        if eng.libraries_behind(libs.generation) {
            load_libraries(&mut eng.functions, libs.payload.as_deref())
                .map_err(|e| CmdError::from_line(&e))?;
            eng.libraries_at(libs.generation);
        }
        let r = change(&mut eng.functions).map_err(|e| CmdError::from_line(&e))?;
        let payload = (eng.functions.counts().0 > 0).then(|| eng.functions.dump());
        if let Err(e) = server
            .storage
            .put_internal(FUNCTIONS_RECORD, payload.as_deref())
        {
            eng.libraries_stale();
            return Err(e.into());
        }
        libs.payload = payload;
        libs.generation += 1;
        scripts
            .libraries_generation
            .store(libs.generation, Ordering::Release);
        eng.libraries_at(libs.generation);
        Ok(r)
    })
}

fn load(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let mut replace = false;
    for a in &args[2..args.len() - 1] {
        if a.eq_ignore_ascii_case(b"replace") {
            replace = true;
        } else {
            return Err(CmdError::err(format_args!(
                "Unknown option given: {}",
                String::from_utf8_lossy(a)
            )));
        }
    }
    let code = &args[args.len() - 1];
    let name = change(ctx.server, |f| f.load(code, replace))?;
    ctx.out.bulk(name.as_bytes());
    Ok(())
}

fn delete(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let name = String::from_utf8_lossy(&args[2]).into_owned();
    change(ctx.server, |f| f.delete(&name).map_err(String::from))?;
    ctx.out.ok();
    Ok(())
}

fn flush(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    match args.get(2) {
        None => {}
        Some(m)
            if args.len() == 3
                && (m.eq_ignore_ascii_case(b"async") || m.eq_ignore_ascii_case(b"sync")) => {}
        Some(_) => {
            return Err(CmdError::fixed(
                "FUNCTION FLUSH only supports SYNC|ASYNC option",
            ))
        }
    }
    change(ctx.server, |f| {
        f.flush();
        Ok(())
    })?;
    ctx.out.ok();
    Ok(())
}

fn restore(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let policy = match args.get(3) {
        None => RestorePolicy::Append,
        Some(p) if p.eq_ignore_ascii_case(b"append") => RestorePolicy::Append,
        Some(p) if p.eq_ignore_ascii_case(b"replace") => RestorePolicy::Replace,
        Some(p) if p.eq_ignore_ascii_case(b"flush") => RestorePolicy::Flush,
        Some(_) => {
            return Err(CmdError::fixed(
                "Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.",
            ))
        }
    };
    if args.len() > 4 {
        return Err(CmdError::syntax());
    }
    let payload = &args[2];
    change(ctx.server, |f| f.restore(payload, policy))?;
    ctx.out.ok();
    Ok(())
}

fn dump(ctx: &mut Ctx<'_>, _args: &Args) -> CmdResult {
    let payload = engines::with(ctx.server, |eng| Ok(eng.functions.dump()))?;
    ctx.out.bulk(&payload);
    Ok(())
}

fn list(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let mut with_code = false;
    let mut pattern: Option<&[u8]> = None;
    let mut i = 2;
    while i < args.len() {
        let a = &args[i];
        if !with_code && a.eq_ignore_ascii_case(b"withcode") {
            with_code = true;
        } else if pattern.is_none() && a.eq_ignore_ascii_case(b"libraryname") {
            i += 1;
            let Some(p) = args.get(i) else {
                return Err(CmdError::fixed("library name argument was not given"));
            };
            pattern = Some(p);
        } else {
            return Err(CmdError::err(format_args!(
                "Unknown argument {}",
                String::from_utf8_lossy(a)
            )));
        }
        i += 1;
    }
    let frame = engines::with(ctx.server, |eng| Ok(eng.functions.list(pattern, with_code)))?;
    frame.encode_with(&mut ctx.out.buf, ctx.out.proto);
    Ok(())
}

fn stats(ctx: &mut Ctx<'_>, _args: &Args) -> CmdResult {
    let running = ctx.server.scripts.running_function();
    let frame = engines::with(ctx.server, |eng| Ok(eng.functions.stats(running.as_ref())))?;
    frame.encode_with(&mut ctx.out.buf, ctx.out.proto);
    Ok(())
}

fn kill(ctx: &mut Ctx<'_>, _args: &Args) -> CmdResult {
    super::kill_on(ctx.server, ctx.out, false)
}

fn help(ctx: &mut Ctx<'_>, _args: &Args) -> CmdResult {
    super::super::admin::help_reply(
        ctx.out,
        "FUNCTION",
        &[
            "LOAD [REPLACE] <FUNCTION CODE>",
            "    Create a new library with the given library name and code.",
            "DELETE <LIBRARY NAME>",
            "    Delete the given library.",
            "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
            "    Return general information on all the libraries.",
            "FLUSH [ASYNC|SYNC]",
            "    Delete all the libraries.",
            "DUMP",
            "    Return a serialized payload representing the current libraries.",
            "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
            "    Restore the libraries represented by the given payload.",
            "STATS",
            "    Return information about the current function running.",
            "KILL",
            "    Kill the current running function.",
        ],
    );
    Ok(())
}
