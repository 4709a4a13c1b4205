//! Replication commands: REPLICAOF / SLAVEOF, ROLE, WAIT, and the handshake a replica sends
//! its primary (REPLCONF, PSYNC). The work is in `crate::replication`.

use super::ctx::{Args, CmdError, CmdResult, Ctx};
use super::spec::{CommandSpec, Flags, KeySpec};
use crate::replication::failover::{Failover, Request};
use crate::replication::{primary, LinkState};
use std::time::Duration;

const ADMIN: Flags = Flags::ADMIN.union(Flags::NOSCRIPT).union(Flags::STALE);

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::new("replicaof", 3, ADMIN, KeySpec::NONE, replicaof)
        .acl(&["admin", "slow", "dangerous"])
        .group("server")
        .doc("Configures a server as replica of another, or promotes it to a master.", "5.0.0", "O(1)"),
    CommandSpec::new("slaveof", 3, ADMIN, KeySpec::NONE, replicaof)
        .acl(&["admin", "slow", "dangerous"])
        .group("server")
        .doc("Sets a Redis server as a replica of another, or promotes it to being a master.", "1.0.0", "O(1)"),
    CommandSpec::new(
        "role",
        1,
        Flags::NOSCRIPT
            .union(Flags::LOADING)
            .union(Flags::STALE)
            .union(Flags::FAST),
        KeySpec::NONE,
        role,
    )
    .acl(&["admin", "fast", "dangerous"])
    .group("server")
    .doc("Returns the replication role.", "2.8.12", "O(1)"),
    CommandSpec::new("wait", 3, Flags::NOSCRIPT, KeySpec::NONE, wait)
        .acl(&["slow", "connection"])
        .group("generic")
        .doc(
            "Blocks until the asynchronous replication of all preceding write commands sent by the connection is completed.",
            "3.0.0",
            "O(1)",
        ),
    CommandSpec::new("failover", -1, ADMIN, KeySpec::NONE, failover)
        .acl(&["admin", "slow", "dangerous"])
        .group("server")
        .doc("Starts a coordinated failover from a server to one of its replicas.", "6.2.0", "O(1)"),
    CommandSpec::new(
        "replconf",
        -1,
        ADMIN.union(Flags::LOADING).union(Flags::ALLOW_BUSY),
        KeySpec::NONE,
        replconf,
    )
    .acl(&["admin", "slow", "dangerous"])
    .group("server")
    .doc("An internal command for configuring the replication stream.", "3.0.0", "O(1)"),
    CommandSpec::new(
        "psync",
        -3,
        Flags::ADMIN.union(Flags::NOSCRIPT).union(Flags::NO_MULTI),
        KeySpec::NONE,
        psync,
    )
    .acl(&["admin", "slow", "dangerous"])
    .group("server")
    .doc("An internal command used in replication.", "2.8.0", "O(1)"),
];

/// In cluster mode the pushed topology sets the roles (`crate::cluster::replicas`).
fn refuse_in_cluster(ctx: &Ctx<'_>, name: &str) -> CmdResult {
    if ctx.server.cluster.node().is_some() {
        return Err(CmdError::err(format_args!(
            "{name} not allowed in cluster mode."
        )));
    }
    Ok(())
}

fn replicaof(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    refuse_in_cluster(ctx, "REPLICAOF")?;
    let server = ctx.server;
    if args[1].eq_ignore_ascii_case(b"no") && args[2].eq_ignore_ascii_case(b"one") {
        if server.repl.is_replica() {
            server
                .repl
                .promote(&server.storage)
                .map_err(CmdError::storage)?;
            *server.config.repl.replicaof.write() = None;
        }
        ctx.out.ok();
        return Ok(());
    }
    let host = String::from_utf8_lossy(&args[1]).into_owned();
    let port = std::str::from_utf8(&args[2])
        .ok()
        .and_then(|p| p.parse::<u16>().ok())
        .ok_or(CmdError::fixed("Invalid master port"))?;
    let snap = server.repl.snapshot(&server.storage);
    if snap
        .following
        .as_ref()
        .is_some_and(|f| f.host == host && f.port == port)
    {
        ctx.out.simple("OK Already connected to specified master");
        return Ok(());
    }
    let Some(me) = server.arc() else {
        return Err(CmdError::fixed("replication is not available"));
    };
    let position = server.storage.repl_position().map_err(CmdError::storage)?;
    *server.config.repl.replicaof.write() = Some((host.clone(), port));
    server.repl.follow(&me, host, port, position);
    ctx.out.ok();
    Ok(())
}

fn role(ctx: &mut Ctx<'_>, _args: &Args) -> CmdResult {
    let snap = ctx.server.repl.snapshot(&ctx.server.storage);
    let out = &mut *ctx.out;
    match &snap.following {
        None => {
            out.array(3);
            out.bulk(b"master");
            out.int(snap.offset as i64);
            out.array(snap.replicas.len());
            for r in &snap.replicas {
                out.array(3);
                out.bulk(r.ip.as_bytes());
                out.bulk(r.port.to_string().as_bytes());
                out.bulk(r.ack.to_string().as_bytes());
            }
        }
        Some(f) => {
            out.array(5);
            out.bulk(b"slave");
            out.bulk(f.host.as_bytes());
            out.int(f.port as i64);
            out.bulk(f.state.role_name().as_bytes());
            out.int(if f.state == LinkState::Connected {
                snap.offset as i64
            } else {
                -1
            });
        }
    }
    Ok(())
}

fn wait(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let n = kvik_resp::parse_i64(&args[1]).ok_or(CmdError::not_integer())?;
    let timeout = kvik_resp::parse_i64(&args[2])
        .ok_or(CmdError::fixed("timeout is not an integer or out of range"))?;
    if timeout < 0 {
        return Err(CmdError::fixed("timeout is negative"));
    }
    let server = ctx.server;
    if server.repl.is_replica() {
        return Err(CmdError::fixed("WAIT cannot be used with replica instances. Please also note that since Redis 4.0 if a replica is configured to be writable (which is not the default) writes to replicas are just local and are not propagated."));
    }
    let offset = server.storage.latest_seq();
    let timeout = (timeout > 0).then(|| Duration::from_millis(timeout as u64));
    let acked = server.repl.wait_acks(offset, n.max(0) as usize, timeout);
    ctx.out.int(acked as i64);
    Ok(())
}

fn replconf(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    if args.len().is_multiple_of(2) {
        return Err(CmdError::syntax());
    }
    for pair in args[1..].chunks(2) {
        if pair[0].eq_ignore_ascii_case(b"listening-port") {
            let port = std::str::from_utf8(&pair[1])
                .ok()
                .and_then(|p| p.parse::<u16>().ok())
                .ok_or(CmdError::not_integer())?;
            ctx.session.repl_port = Some(port);
        } else if pair[0].eq_ignore_ascii_case(b"kvik-fullsync-resume") {
            // "<checkpoint id> <offset> <file>"; unparsable: a full sync from the start.
            ctx.session.repl_resume = std::str::from_utf8(&pair[1])
                .ok()
                .and_then(crate::replication::checkpoint::Resume::parse);
        }
    }
    ctx.out.ok();
    Ok(())
}

/// PSYNC replid offset: the connection becomes a replication link; the feeder thread writes
/// the reply (+FULLRESYNC or +CONTINUE) itself.
fn psync(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let server = ctx.server;
    if server.repl.is_replica() {
        return Err(CmdError::fixed(
            "Can't SYNC while not connected with my master",
        ));
    }
    let Some(me) = server.arc() else {
        return Err(CmdError::fixed("replication is not available"));
    };
    let replid = String::from_utf8_lossy(&args[1]).into_owned();
    let offset = kvik_resp::parse_i64(&args[2]).ok_or(CmdError::not_integer())?;
    let req = primary::Request {
        replid,
        offset: offset.max(0) as u64,
        listening_port: ctx.session.repl_port,
        resume: ctx.session.repl_resume.take(),
    };
    ctx.session.handoff = Some(crate::session::Handoff(Box::new(move |stream| {
        primary::spawn(me, stream, req)
    })));
    Ok(())
}

/// FAILOVER [TO host port [FORCE]] [ABORT] [TIMEOUT ms]
fn failover(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    refuse_in_cluster(ctx, "FAILOVER")?;
    let server = ctx.server;
    let mut req = Request {
        target: None,
        timeout: None,
        force: false,
    };
    let mut abort = false;
    let mut i = 1;
    while i < args.len() {
        let a = &args[i];
        if a.eq_ignore_ascii_case(b"to") && i + 2 < args.len() && req.target.is_none() {
            let host = String::from_utf8_lossy(&args[i + 1]).into_owned();
            let port = std::str::from_utf8(&args[i + 2])
                .ok()
                .and_then(|p| p.parse::<u16>().ok())
                .ok_or(CmdError::not_integer())?;
            req.target = Some((host, port));
            i += 3;
        } else if a.eq_ignore_ascii_case(b"force") && !req.force {
            req.force = true;
            i += 1;
        } else if a.eq_ignore_ascii_case(b"abort") && !abort {
            abort = true;
            i += 1;
        } else if a.eq_ignore_ascii_case(b"timeout") && i + 1 < args.len() && req.timeout.is_none()
        {
            let ms = kvik_resp::parse_i64(&args[i + 1]).ok_or(CmdError::not_integer())?;
            if ms <= 0 {
                return Err(CmdError::fixed("FAILOVER timeout must be greater than 0"));
            }
            req.timeout = Some(Duration::from_millis(ms as u64));
            i += 2;
        } else {
            return Err(CmdError::syntax());
        }
    }
    if abort {
        if req.target.is_some() || req.force || req.timeout.is_some() {
            return Err(CmdError::syntax());
        }
        server.repl.failover.abort().map_err(CmdError::fixed)?;
        ctx.out.ok();
        return Ok(());
    }
    let Some(me) = server.arc() else {
        return Err(CmdError::fixed("replication is not available"));
    };
    Failover::start(&me, req).map_err(CmdError::fixed)?;
    ctx.out.ok();
    Ok(())
}
