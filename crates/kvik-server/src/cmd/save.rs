//! SAVE, BGSAVE, LASTSAVE: consistent copies of the whole database as RocksDB checkpoints,
//! written to `<dir>/<dbfilename>.checkpoint` (see `saves`); kvik's backup. A server starts
//! from one with `kvik-server --restore-from <checkpoint>`.

use super::ctx::{Args, CmdError, CmdResult, Ctx};
use super::spec::{CommandSpec, Flags, KeySpec};
use crate::config::Param;
use crate::saves::Saves;
use crate::server::Server;
use std::path::PathBuf;

const ADMIN: Flags = Flags::ADMIN.union(Flags::NOSCRIPT);
const ALREADY: CmdError = CmdError::fixed("Background save already in progress");

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::new("save", 1, ADMIN.union(Flags::NO_MULTI), KeySpec::NONE, save)
        .acl(&["admin", "slow", "dangerous"])
        .group("server")
        .doc(
            "Synchronously saves the database(s) to disk.",
            "1.0.0",
            "O(N) where N is the total number of keys in all databases",
        ),
    CommandSpec::new("bgsave", -1, ADMIN, KeySpec::NONE, bgsave)
        .acl(&["admin", "slow", "dangerous"])
        .group("server")
        .doc(
            "Asynchronously saves the database(s) to disk.",
            "1.0.0",
            "O(1)",
        ),
    CommandSpec::new(
        "lastsave",
        1,
        Flags::LOADING.union(Flags::STALE).union(Flags::FAST),
        KeySpec::NONE,
        lastsave,
    )
    .acl(&["admin", "fast", "dangerous"])
    .group("server")
    .doc(
        "Returns the Unix timestamp of the last successful save to disk.",
        "1.0.0",
        "O(1)",
    ),
];

/// Where a save goes now: `<dir>/<dbfilename>.checkpoint`.
pub fn save_target(server: &Server) -> PathBuf {
    let name = Param::lookup("dbfilename")
        .map(|p| p.get(&server.config))
        .unwrap_or_else(|| "dump.rdb".into());
    Saves::target(&server.config.dir.read(), &name)
}

fn save(ctx: &mut Ctx<'_>, _args: &Args) -> CmdResult {
    let target = save_target(ctx.server);
    match ctx.server.saves.save(&ctx.server.storage, &target) {
        None => Err(ALREADY),
        Some(Ok(())) => {
            ctx.out.ok();
            Ok(())
        }
        Some(Err(e)) => {
            tracing::warn!("SAVE failed: {e}");
            Err(CmdError::err(format_args!(
                "Failed to save a checkpoint: {e}"
            )))
        }
    }
}

/// BGSAVE [SCHEDULE]: the checkpoint is written by the saver thread. Inside MULTI/EXEC Redis
/// schedules it and says so; kvik starts it at once (nothing of a transaction can be half in
/// it: a checkpoint is one RocksDB sequence number) but gives the same answer.
fn bgsave(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    match args.len() {
        1 => {}
        2 if args[1].eq_ignore_ascii_case(b"schedule") => {}
        _ => return Err(CmdError::syntax()),
    }
    if !ctx.server.saves.begin_background(save_target(ctx.server)) {
        return Err(ALREADY);
    }
    if ctx.session.in_exec {
        ctx.out.simple("Background saving scheduled");
    } else {
        ctx.out.simple("Background saving started");
    }
    Ok(())
}

fn lastsave(ctx: &mut Ctx<'_>, _args: &Args) -> CmdResult {
    ctx.out.int(ctx.server.saves.last_save() as i64);
    Ok(())
}
