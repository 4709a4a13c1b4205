//! MONITOR, and the dispatcher's feed of every command to the monitors (the line format and
//! delivery are `pubsub::monitor`).
//!
//! What is shown follows Redis 7.0: a command is shown when it runs (rejected commands, such
//! as unknown ones, are not), before its effects, except EXEC, shown after the commands it ran;
//! commands of a script show as `[db lua]` after the script's own line; administrative
//! commands (CONFIG, DEBUG, SAVE, MONITOR ...) are never shown; a blocked command shows once,
//! when it blocks.

use super::ctx::{Args, CmdError, CmdResult, Ctx};
use super::spec::{CommandSpec, Flags, KeySpec};
use super::Entry;
use crate::pubsub::monitor::Origin;
use crate::server::Server;
use crate::session::Session;

pub static COMMANDS: &[CommandSpec] = &[CommandSpec::new(
    "monitor",
    1,
    Flags::ADMIN
        .union(Flags::NOSCRIPT)
        .union(Flags::LOADING)
        .union(Flags::STALE),
    KeySpec::NONE,
    monitor,
)
.acl(&["admin", "slow", "dangerous"])
.group("server")
.doc(
    "Listens for all requests received by the server in real-time.",
    "1.0.0",
    "",
)];

/// MONITOR: from now on the client receives the line of every command. A client already
/// monitoring gets no reply (as Redis); inside EXEC it is refused as Redis refuses it.
fn monitor(ctx: &mut Ctx<'_>, _args: &Args) -> CmdResult {
    if ctx.session.in_exec {
        return Err(CmdError::fixed(
            "MONITOR isn't allowed for DENY BLOCKING client",
        ));
    }
    if ctx.session.monitor.is_some() {
        return Ok(());
    }
    let guard = ctx.server.pubsub.add_monitor(ctx.session.client.clone());
    ctx.session.monitor = Some(guard);
    ctx.out.ok();
    Ok(())
}

/// Shows `args`, run by `session` as `entry`, to the monitors (one load when there are none).
pub(super) fn feed(server: &Server, session: &Session, entry: &Entry, args: &Args) {
    if !server.pubsub.monitoring() || entry.spec.flags.contains(Flags::ADMIN) {
        return;
    }
    let origin = if session.in_script {
        Origin::Lua
    } else {
        Origin::Client(&session.client.addr)
    };
    server.pubsub.feed_monitors(session.db, origin, args);
}
