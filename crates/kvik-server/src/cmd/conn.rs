//! Connection commands: PING ECHO HELLO AUTH SELECT QUIT RESET. They change only the session
//! (protocol, database, authentication), never the keyspace.

use super::ctx::{Args, CmdError, CmdResult, Ctx, ErrorKind};
use super::spec::{CommandSpec, DbRef, Flags, InMulti, KeySpec, Routing};
use kvik_resp::Proto;
use std::sync::atomic::Ordering::Relaxed;

const CONN: Flags = Flags::FAST.union(Flags::LOADING).union(Flags::STALE);
const CONN_NOAUTH: Flags = CONN.union(Flags::NO_AUTH);

pub static COMMANDS: &[CommandSpec] = &[
    // Every connection command but RESET and QUIT is answered on the I/O thread (`io_thread`):
    // connecting, a handshake and a health check must not queue behind workers that wait out a
    // write stall.
    CommandSpec::new("ping", -1, CONN, KeySpec::NONE, ping)
        .io_thread()
        .in_subscribe()
        .acl(&["fast", "connection"])
        .group("connection")
        .doc("Returns the server's liveliness response.", "1.0.0", "O(1)"),
    CommandSpec::new("echo", 2, CONN, KeySpec::NONE, echo)
        .io_thread()
        .acl(&["fast", "connection"])
        .group("connection")
        .doc("Returns the given string.", "1.0.0", "O(1)"),
    CommandSpec::new(
        "hello",
        -1,
        CONN_NOAUTH.union(Flags::NOSCRIPT),
        KeySpec::NONE,
        hello,
    )
    .io_thread()
    .acl(&["fast", "connection"])
    .group("connection")
    .doc("Handshakes with the Redis server.", "6.0.0", "O(1)"),
    CommandSpec::new(
        "auth",
        -2,
        CONN_NOAUTH.union(Flags::NOSCRIPT),
        KeySpec::NONE,
        auth,
    )
    .io_thread()
    .acl(&["fast", "connection"])
    .group("connection")
    .doc(
        "Authenticates the connection.",
        "1.0.0",
        "O(N) where N is the number of passwords defined for the user",
    ),
    CommandSpec::new("select", 2, CONN, KeySpec::NONE, select)
        .io_thread()
        .routing(Routing::DbZeroOnly)
        .db_refs(|_| vec![DbRef::Selects(1)])
        .acl(&["fast", "connection"])
        .group("connection")
        .doc("Changes the selected database.", "1.0.0", "O(1)"),
    CommandSpec::new(
        "quit",
        -1,
        CONN_NOAUTH.union(Flags::NOSCRIPT).union(Flags::ALLOW_BUSY),
        KeySpec::NONE,
        quit,
    )
    .in_multi(InMulti::RunsNow)
    .in_subscribe()
    .acl(&["fast", "connection"])
    .group("connection")
    .doc("Closes the connection.", "1.0.0", "O(1)"),
    CommandSpec::new(
        "reset",
        1,
        CONN_NOAUTH.union(Flags::NOSCRIPT).union(Flags::ALLOW_BUSY),
        KeySpec::NONE,
        reset,
    )
    .in_multi(InMulti::RunsNow)
    .in_subscribe()
    .acl(&["fast", "connection"])
    .group("connection")
    .doc("Resets the connection.", "6.2.0", "O(1)"),
];

fn ping(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    if ctx.session.proto == Proto::Resp2 && ctx.session.subs.any() {
        // Subscribed RESP2 clients read pushes, so Redis answers in the same shape.
        if args.len() > 2 {
            return Err(CmdError::wrong_args("ping"));
        }
        ctx.out.array(2);
        ctx.out.bulk(b"pong");
        ctx.out.bulk(args.get(1).map_or(&b""[..], |a| a.as_ref()));
        return Ok(());
    }
    match args.len() {
        1 => ctx.out.simple("PONG"),
        2 => ctx.out.bulk(&args[1]),
        _ => return Err(CmdError::wrong_args("ping")),
    }
    Ok(())
}

fn echo(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    ctx.out.bulk(&args[1]);
    Ok(())
}

/// Logs the client in as `user` if `password` opens it (`via`: AUTH or HELLO, for the ACL log
/// of a failure).
fn log_in(ctx: &mut Ctx<'_>, user: &[u8], password: &[u8], via: &str) -> CmdResult {
    let acl = &ctx.server.config.acl;
    match acl.authenticate(user, password) {
        Some(cell) => {
            *ctx.session.client.user.lock() = Some(cell.name.clone());
            ctx.session.user = Some(cell);
            ctx.session.authenticated = true;
            Ok(())
        }
        None => {
            let name = String::from_utf8_lossy(user).into_owned();
            crate::acl::log::record(
                ctx.server,
                ctx.session,
                "auth",
                "toplevel",
                via.into(),
                &name,
            );
            Err(CmdError::new(
                ErrorKind::WrongPass,
                "invalid username-password pair or user is disabled.",
            ))
        }
    }
}

fn auth(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let (user, password): (&[u8], &[u8]) = match args.len() {
        2 => {
            if ctx.server.config.acl.default_nopass() {
                return Err(CmdError::err(
                    "AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?",
                ));
            }
            (b"default", &args[1])
        }
        3 => (&args[1], &args[2]),
        _ => return Err(CmdError::syntax()),
    };
    log_in(ctx, user, password, "AUTH")?;
    ctx.out.ok();
    Ok(())
}

/// Validates a client name as Redis does (CLIENT SETNAME, HELLO SETNAME).
pub fn validate_client_name(name: &[u8]) -> CmdResult {
    if name.iter().any(|&c| !(b'!'..=b'~').contains(&c)) {
        return Err(CmdError::err(
            "Client names cannot contain spaces, newlines or special characters.",
        ));
    }
    Ok(())
}

fn hello(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let mut proto = ctx.session.proto;
    let mut i = 1;
    if args.len() >= 2 {
        proto = match kvik_resp::parse_i64(&args[1]) {
            Some(2) => Proto::Resp2,
            Some(3) => Proto::Resp3,
            Some(_) => {
                return Err(CmdError::new(
                    ErrorKind::NoProto,
                    "unsupported protocol version",
                ))
            }
            None => {
                return Err(CmdError::err(
                    "Protocol version is not an integer or out of range",
                ))
            }
        };
        i = 2;
    }
    let mut credentials = None;
    let mut name = None;
    while i < args.len() {
        let more = args.len() - i - 1;
        if args[i].eq_ignore_ascii_case(b"auth") && more >= 2 {
            credentials = Some((&args[i + 1], &args[i + 2]));
            i += 3;
        } else if args[i].eq_ignore_ascii_case(b"setname") && more >= 1 {
            validate_client_name(&args[i + 1])?;
            name = Some(args[i + 1].to_vec());
            i += 2;
        } else {
            return Err(CmdError::err(format_args!(
                "Syntax error in HELLO option '{}'",
                String::from_utf8_lossy(&args[i])
            )));
        }
    }
    if let Some((user, password)) = credentials {
        log_in(ctx, user, password, "HELLO")?;
    }
    if !ctx.session.authenticated {
        return Err(CmdError::new(ErrorKind::NoAuth, "HELLO must be called with the client already authenticated, otherwise the HELLO AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time"));
    }
    if let Some(name) = name {
        *ctx.session.client.name.lock() = Some(name);
    }
    ctx.session.proto = proto;
    ctx.out.proto = proto;
    ctx.session
        .client
        .resp
        .store(if proto == Proto::Resp3 { 3 } else { 2 }, Relaxed);

    let out = &mut *ctx.out;
    out.map(7);
    out.bulk(b"server");
    out.bulk(b"redis");
    out.bulk(b"version");
    out.bulk(crate::stats::info::REDIS_VERSION.as_bytes());
    out.bulk(b"proto");
    out.int(if proto == Proto::Resp3 { 3 } else { 2 });
    out.bulk(b"id");
    out.int(ctx.session.client.id as i64);
    out.bulk(b"mode");
    out.bulk(if ctx.server.cluster.node().is_some() {
        b"cluster"
    } else {
        b"standalone"
    });
    out.bulk(b"role");
    out.bulk(if ctx.server.repl.is_replica() {
        b"replica"
    } else {
        b"master"
    });
    out.bulk(b"modules");
    out.array(0);
    Ok(())
}

fn select(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let db = kvik_resp::parse_i64(&args[1]).ok_or(CmdError::not_integer())?;
    if db < 0 || db >= ctx.server.config.databases() as i64 {
        return Err(CmdError::db_out_of_range());
    }
    ctx.session.db = db as u16;
    ctx.session.client.db.store(db as u16, Relaxed);
    ctx.out.ok();
    Ok(())
}

fn quit(ctx: &mut Ctx<'_>, _args: &Args) -> CmdResult {
    ctx.session.close_after_reply = true;
    ctx.out.ok();
    Ok(())
}

fn reset(ctx: &mut Ctx<'_>, _args: &Args) -> CmdResult {
    let s = &mut *ctx.session;
    // Redis's clearClientConnectionState: the transaction and the watched keys go too.
    s.multi = None;
    s.watches.clear();
    s.subs.clear();
    s.monitor = None;
    s.db = 0;
    s.proto = Proto::Resp2;
    s.user = None;
    *s.client.user.lock() = None;
    s.authenticated = ctx.server.config.acl.default_authenticated();
    s.asking = false;
    s.readonly = false;
    s.tracking = None; // turns CLIENT TRACKING off
    s.reply_mode = crate::session::ReplyMode::On;
    s.client.db.store(0, Relaxed);
    s.client.resp.store(2, Relaxed);
    *s.client.name.lock() = None;
    ctx.out.proto = Proto::Resp2;
    ctx.out.simple("RESET");
    Ok(())
}
