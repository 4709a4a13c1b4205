//! CLIENT: connection introspection and control (ID SETNAME GETNAME LIST INFO KILL NO-EVICT
//! NO-TOUCH SETINFO REPLY UNBLOCK PAUSE UNPAUSE TRACKING CACHING GETREDIR TRACKINGINFO HELP), over
//! the shared [`ClientInfo`] records of the client registry.
//!
//! Tracking itself (the table, the invalidations) is `crate::tracking`; PAUSE is `crate::pause`.
//! NO-EVICT is recorded (flag `e`) and NO-TOUCH accepted; neither changes anything, since kvik
//! never evicts clients and keeps no key access times.
//!
//! The subcommands that only read or set the connection's own record (ID, SETNAME, GETNAME,
//! SETINFO, INFO, LIST, NO-EVICT, NO-TOUCH, GETREDIR, TRACKINGINFO) are answered on the I/O
//! thread (`io_thread`): client libraries send SETINFO on connect, which must not queue behind
//! workers that wait out a write stall.

use super::admin::help_reply;
use super::ctx::{Args, CmdError, CmdResult, Ctx};
use super::spec::{CommandSpec, Flags, KeySpec};
use crate::clients::{ClientFlags, ClientInfo, NO_CMD};
use crate::session::ReplyMode;
use crate::tracking::{Mode, SessionTracking};
use std::fmt::Write;
use std::sync::atomic::Ordering::Relaxed;

const SUB: Flags = Flags::NOSCRIPT.union(Flags::LOADING).union(Flags::STALE);
const ADMIN_SUB: Flags = SUB.union(Flags::ADMIN);
const ACL: &[&str] = &["slow", "connection"];
const ADMIN_ACL: &[&str] = &["admin", "slow", "dangerous", "connection"];

static SUBS: &[CommandSpec] = &[
    CommandSpec::new("id", 2, SUB, KeySpec::NONE, client_id)
        .io_thread()
        .acl(ACL)
        .group("connection")
        .doc(
            "Returns the unique client ID of the connection.",
            "5.0.0",
            "O(1)",
        ),
    CommandSpec::new("setname", 3, SUB, KeySpec::NONE, client_setname)
        .io_thread()
        .acl(ACL)
        .group("connection")
        .doc("Sets the connection name.", "2.6.9", "O(1)"),
    CommandSpec::new("getname", 2, SUB, KeySpec::NONE, client_getname)
        .io_thread()
        .acl(ACL)
        .group("connection")
        .doc("Returns the name of the connection.", "2.6.9", "O(1)"),
    CommandSpec::new("list", -2, ADMIN_SUB, KeySpec::NONE, client_list)
        .io_thread()
        .acl(ADMIN_ACL)
        .group("connection")
        .doc(
            "Lists open connections.",
            "2.4.0",
            "O(N) where N is the number of client connections",
        ),
    CommandSpec::new("info", 2, SUB, KeySpec::NONE, client_info)
        .io_thread()
        .acl(ACL)
        .group("connection")
        .doc("Returns information about the connection.", "6.2.0", "O(1)"),
    CommandSpec::new("kill", -3, ADMIN_SUB, KeySpec::NONE, client_kill)
        .acl(ADMIN_ACL)
        .group("connection")
        .doc(
            "Terminates open connections.",
            "2.4.0",
            "O(N) where N is the number of client connections",
        ),
    CommandSpec::new("no-evict", 3, ADMIN_SUB, KeySpec::NONE, client_no_evict)
        .io_thread()
        .acl(ADMIN_ACL)
        .group("connection")
        .doc(
            "Sets the client eviction mode of the connection.",
            "7.0.0",
            "O(1)",
        ),
    CommandSpec::new("no-touch", 3, SUB, KeySpec::NONE, client_on_off)
        .io_thread()
        .acl(ACL)
        .group("connection")
        .doc(
            "Controls whether commands sent by the client affect the LRU/LFU of accessed keys.",
            "7.2.0",
            "O(1)",
        ),
    CommandSpec::new("setinfo", 4, SUB, KeySpec::NONE, client_setinfo)
        .io_thread()
        .acl(ACL)
        .group("connection")
        .doc(
            "Sets information specific to the client or connection.",
            "7.2.0",
            "O(1)",
        ),
    CommandSpec::new("reply", 3, SUB, KeySpec::NONE, client_reply)
        .acl(ACL)
        .group("connection")
        .doc(
            "Instructs the server whether to reply to commands.",
            "3.2.0",
            "O(1)",
        ),
    CommandSpec::new("unblock", -3, ADMIN_SUB, KeySpec::NONE, client_unblock)
        .acl(ADMIN_ACL)
        .group("connection")
        .doc(
            "Unblocks a client blocked by a blocking command from a different connection.",
            "5.0.0",
            "O(log N) where N is the number of client connections",
        ),
    CommandSpec::new("pause", -3, ADMIN_SUB, KeySpec::NONE, client_pause)
        .acl(ADMIN_ACL)
        .group("connection")
        .doc(
            "Suspends commands processing.",
            "3.0.0",
            "O(1)",
        ),
    CommandSpec::new("unpause", 2, ADMIN_SUB, KeySpec::NONE, client_unpause)
        .acl(ADMIN_ACL)
        .group("connection")
        .doc(
            "Resumes processing commands from paused clients.",
            "6.2.0",
            "O(N) Where N is the number of paused clients",
        ),
    CommandSpec::new("tracking", -3, SUB, KeySpec::NONE, client_tracking)
        .acl(ACL)
        .group("connection")
        .doc(
            "Controls server-assisted client-side caching for the connection.",
            "6.0.0",
            "O(1). Some options may introduce additional complexity.",
        ),
    CommandSpec::new("caching", 3, SUB, KeySpec::NONE, client_caching)
        .acl(ACL)
        .group("connection")
        .doc(
            "Instructs the server whether to track the keys in the next request.",
            "6.0.0",
            "O(1)",
        ),
    CommandSpec::new("getredir", 2, SUB, KeySpec::NONE, client_getredir)
        .io_thread()
        .acl(ACL)
        .group("connection")
        .doc(
            "Returns the client ID to which the connection's tracking notifications are redirected.",
            "6.0.0",
            "O(1)",
        ),
    CommandSpec::new("trackinginfo", 2, SUB, KeySpec::NONE, client_trackinginfo)
        .io_thread()
        .acl(ACL)
        .group("connection")
        .doc(
            "Returns information about server-assisted client-side caching for the connection.",
            "6.2.0",
            "O(1)",
        ),
    CommandSpec::new(
        "help",
        2,
        Flags::LOADING.union(Flags::STALE),
        KeySpec::NONE,
        client_help,
    )
    .acl(ACL)
    .group("connection")
    .doc(
        "Returns helpful text about the different subcommands.",
        "5.0.0",
        "O(1)",
    ),
];

pub static COMMANDS: &[CommandSpec] = &[
    // The container has no flags of its own in Redis 7.0 (COMMAND INFO CLIENT shows none); each
    // subcommand carries NOSCRIPT / LOADING / STALE (and ADMIN where Redis has it).
    CommandSpec::new(
        "client",
        -2,
        Flags::empty(),
        KeySpec::NONE,
        super::spec::container,
    )
    .acl(&["slow"])
    .group("connection")
    .doc(
        "A container for client connection commands.",
        "2.4.0",
        "Depends on subcommand.",
    )
    .subs(SUBS),
];

/// One CLIENT LIST / CLIENT INFO line (without the trailing newline), in Redis 7.0's field
/// order plus Redis 7.2's `watch=` and Redis 8.0's `io-thread=`. Fields kvik does not track (memory breakdown) show Redis's
/// idle values.
pub fn client_line(c: &ClientInfo, now_ms: u64) -> String {
    let cmd = match c.last_cmd.load(Relaxed) {
        NO_CMD => "NULL".to_string(),
        id => super::table().entry(id).full_name.clone(),
    };
    let obuf = c.obuf.load(Relaxed);
    let multi = c.state.multi.load(Relaxed);
    let mut s = String::with_capacity(300);
    let _ = write!(
        s,
        "id={} addr={} laddr={} fd={} name={} age={} idle={} flags={} db={} sub={} psub={} ssub={} \
         multi={} watch={} qbuf={} qbuf-free=0 argv-mem=0 multi-mem=0 rbs=0 rbp=0 obl=0 oll=0 \
         omem={} tot-mem=0 events=r cmd={} user={} redir={} resp={} io-thread={}",
        c.id,
        c.addr,
        c.laddr,
        c.fd,
        c.name_string(),
        now_ms.saturating_sub(c.created_ms) / 1000,
        now_ms.saturating_sub(c.last_interaction_ms.load(Relaxed)) / 1000,
        flag_letters(c),
        c.db.load(Relaxed),
        c.subs.channels.load(Relaxed),
        c.subs.patterns.load(Relaxed),
        c.subs.shard.load(Relaxed),
        multi,
        c.state.watch.load(Relaxed),
        c.qbuf.load(Relaxed),
        obuf,
        cmd,
        c.user_name(),
        c.state.redir.load(Relaxed),
        c.resp.load(Relaxed),
        c.io_thread.load(Relaxed),
    );
    s
}

/// CLIENT LIST's `flags=`: Redis's letters in Redis's order, `N` for none.
fn flag_letters(c: &ClientInfo) -> String {
    let f = c.state.flags();
    let letters = [
        ('P', c.subs.any()),
        ('x', c.state.multi.load(Relaxed) >= 0),
        ('b', f.contains(ClientFlags::BLOCKED)),
        ('t', f.contains(ClientFlags::TRACKING)),
        ('R', f.contains(ClientFlags::BROKEN_REDIR)),
        ('B', f.contains(ClientFlags::BCAST)),
        ('e', f.contains(ClientFlags::NO_EVICT)),
    ];
    let s: String = letters
        .iter()
        .filter(|(_, on)| *on)
        .map(|(l, _)| l)
        .collect();
    if s.is_empty() {
        "N".into()
    } else {
        s
    }
}

fn client_id(ctx: &mut Ctx<'_>, _args: &Args) -> CmdResult {
    ctx.out.int(ctx.session.id() as i64);
    Ok(())
}

fn client_setname(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let name = &args[2];
    super::conn::validate_client_name(name)?;
    // An empty name removes the name, as in Redis.
    *ctx.session.client.name.lock() = (!name.is_empty()).then(|| name.to_vec());
    ctx.out.ok();
    Ok(())
}

fn client_getname(ctx: &mut Ctx<'_>, _args: &Args) -> CmdResult {
    let name = ctx.session.client.name.lock().clone();
    ctx.out.bulk_or_null(name.as_deref());
    Ok(())
}

/// Client types of Redis's `getClientTypeByName`. A client of the I/O threads is `pubsub`
/// while it has subscriptions, else `normal`; replicas' links are not among them (their
/// feeder threads hold the sockets), so only CLIENT KILL TYPE replica reaches them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ClientType {
    Normal,
    PubSub,
    /// replica, slave: a replica's link (see `Replication::cut_replica_links`).
    Replica,
    /// master: no kvik client has it.
    Master,
}

fn client_type(name: &[u8]) -> Result<ClientType, CmdError> {
    let lower = name.to_ascii_lowercase();
    match &lower[..] {
        b"normal" => Ok(ClientType::Normal),
        b"pubsub" => Ok(ClientType::PubSub),
        b"slave" | b"replica" => Ok(ClientType::Replica),
        b"master" => Ok(ClientType::Master),
        _ => Err(CmdError::err(format_args!(
            "Unknown client type '{}'",
            String::from_utf8_lossy(name)
        ))),
    }
}

fn type_of(c: &ClientInfo) -> ClientType {
    if c.subs.any() {
        ClientType::PubSub
    } else {
        ClientType::Normal
    }
}

/// CLIENT LIST [TYPE normal|master|replica|pubsub] | [ID id [id ...]]
fn client_list(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let clients = ctx.server.clients.snapshot();
    let selected: Vec<_> = if args.len() == 4 && args[2].eq_ignore_ascii_case(b"type") {
        let wanted = client_type(&args[3])?;
        clients
            .into_iter()
            .filter(|c| type_of(c) == wanted)
            .collect()
    } else if args.len() > 3 && args[2].eq_ignore_ascii_case(b"id") {
        let mut ids = Vec::new();
        for a in &args[3..] {
            ids.push(kvik_resp::parse_i64(a).ok_or_else(|| CmdError::err("Invalid client ID"))?);
        }
        clients
            .into_iter()
            .filter(|c| ids.contains(&(c.id as i64)))
            .collect()
    } else if args.len() == 2 {
        clients
    } else {
        return Err(CmdError::syntax());
    };
    let mut text = String::new();
    for c in selected {
        text.push_str(&client_line(&c, ctx.now_ms));
        text.push('\n');
    }
    ctx.out.verbatim(text.as_bytes());
    Ok(())
}

fn client_info(ctx: &mut Ctx<'_>, _args: &Args) -> CmdResult {
    let mut line = client_line(&ctx.session.client, ctx.now_ms);
    line.push('\n');
    ctx.out.verbatim(line.as_bytes());
    Ok(())
}

/// The filters of CLIENT KILL's option form.
#[derive(Default)]
struct KillFilter {
    id: Option<u64>,
    addr: Option<Vec<u8>>,
    laddr: Option<Vec<u8>>,
    /// The ACL user asked for (USER).
    user: Option<String>,
    /// The TYPE asked for.
    client_type: Option<ClientType>,
    skipme: bool,
}

impl KillFilter {
    fn parse(args: &Args, acl: &crate::acl::Acl) -> Result<KillFilter, CmdError> {
        let mut f = KillFilter {
            skipme: true,
            ..Default::default()
        };
        let mut i = 2;
        while i < args.len() {
            if i + 1 >= args.len() {
                return Err(CmdError::syntax());
            }
            let (opt, v) = (&args[i], &args[i + 1]);
            if opt.eq_ignore_ascii_case(b"id") {
                match kvik_resp::parse_i64(v) {
                    Some(n) if n >= 1 => f.id = Some(n as u64),
                    _ => return Err(CmdError::err("client-id should be greater than 0")),
                }
            } else if opt.eq_ignore_ascii_case(b"type") {
                f.client_type = Some(client_type(v)?);
            } else if opt.eq_ignore_ascii_case(b"addr") {
                f.addr = Some(v.to_vec());
            } else if opt.eq_ignore_ascii_case(b"laddr") {
                f.laddr = Some(v.to_vec());
            } else if opt.eq_ignore_ascii_case(b"user") {
                let Some(user) = acl.get(v) else {
                    return Err(CmdError::err(format_args!(
                        "No such user '{}'",
                        String::from_utf8_lossy(v)
                    )));
                };
                f.user = Some(user.name.clone());
            } else if opt.eq_ignore_ascii_case(b"skipme") {
                f.skipme = if v.eq_ignore_ascii_case(b"yes") {
                    true
                } else if v.eq_ignore_ascii_case(b"no") {
                    false
                } else {
                    return Err(CmdError::syntax());
                };
            } else {
                return Err(CmdError::syntax());
            }
            i += 2;
        }
        Ok(f)
    }

    /// TYPE replica and no other criterion: the replicas' links are killed too.
    fn only_replicas(&self) -> bool {
        self.client_type == Some(ClientType::Replica)
            && self.id.is_none()
            && self.addr.is_none()
            && self.laddr.is_none()
            && self.user.is_none()
    }

    fn matches(&self, c: &ClientInfo) -> bool {
        self.client_type.is_none_or(|t| t == type_of(c))
            && self.id.is_none_or(|id| id == c.id)
            && self.addr.as_deref().is_none_or(|a| a == c.addr.as_bytes())
            && self.user.as_deref().is_none_or(|u| u == c.user_name())
            && self
                .laddr
                .as_deref()
                .is_none_or(|a| a == c.laddr.as_bytes())
    }
}

/// CLIENT KILL ip:port (old form: OK or "No such client") or CLIENT KILL <filter> <value> ...
/// (new form: the number of clients killed). Killing the calling client closes it after the
/// reply, as Redis does.
/// CLIENT UNBLOCK id [TIMEOUT|ERROR]: answers a client blocked by BLPOP & co. as if its timeout
/// expired, or with the UNBLOCKED error (see `crate::blocking`).
fn client_unblock(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    if args.len() > 4 {
        return Err(CmdError::err(
            "unknown subcommand or wrong number of arguments for 'unblock'. Try CLIENT HELP.",
        ));
    }
    let id = kvik_resp::parse_i64(&args[2]).ok_or(CmdError::not_integer())?;
    let error = match args.get(3) {
        None => false,
        Some(a) if a.eq_ignore_ascii_case(b"timeout") => false,
        Some(a) if a.eq_ignore_ascii_case(b"error") => true,
        Some(_) => {
            return Err(CmdError::err(
                "CLIENT UNBLOCK reason should be TIMEOUT or ERROR",
            ))
        }
    };
    let done = id > 0 && ctx.server.blocking.unblock_client(id as u64, error);
    ctx.out.int(i64::from(done));
    Ok(())
}

fn client_kill(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let me = ctx.session.id();
    let clients = ctx.server.clients.snapshot();
    if args.len() == 3 {
        let target = clients
            .iter()
            .find(|c| c.addr.as_bytes() == &args[2][..])
            .ok_or_else(|| CmdError::err("No such client"))?;
        if target.id == me {
            ctx.session.close_after_reply = true;
        } else {
            target.kill();
        }
        ctx.out.ok();
        return Ok(());
    }
    let filter = KillFilter::parse(args, &ctx.server.config.acl)?;
    let mut killed = 0;
    for c in clients.iter().filter(|c| filter.matches(c)) {
        if c.id == me {
            if filter.skipme {
                continue;
            }
            ctx.session.close_after_reply = true;
        } else {
            c.kill();
        }
        killed += 1;
    }
    if filter.only_replicas() {
        killed += ctx.server.repl.cut_replica_links() as i64;
    }
    ctx.out.int(killed);
    Ok(())
}

/// CLIENT NO-TOUCH on|off: accepted, no effect in kvik.
fn client_on_off(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    on_off(&args[2])?;
    ctx.out.ok();
    Ok(())
}

/// CLIENT NO-EVICT on|off: shown as flag `e`; kvik never evicts clients.
fn client_no_evict(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let on = on_off(&args[2])?;
    ctx.session.client.state.set(ClientFlags::NO_EVICT, on);
    ctx.out.ok();
    Ok(())
}

fn on_off(arg: &[u8]) -> Result<bool, CmdError> {
    if arg.eq_ignore_ascii_case(b"on") {
        Ok(true)
    } else if arg.eq_ignore_ascii_case(b"off") {
        Ok(false)
    } else {
        Err(CmdError::syntax())
    }
}

/// CLIENT SETINFO LIB-NAME|LIB-VER value (Redis 7.2; redis-py and others send it on connect).
/// Validated as Redis does and accepted; kvik's CLIENT LIST keeps Redis 7.0's fields, which do
/// not include the library.
fn client_setinfo(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let attr = &args[2];
    let what = if attr.eq_ignore_ascii_case(b"lib-name") {
        "lib-name"
    } else if attr.eq_ignore_ascii_case(b"lib-ver") {
        "lib-ver"
    } else {
        return Err(CmdError::err(format_args!(
            "Unrecognized option '{}'",
            String::from_utf8_lossy(attr)
        )));
    };
    if args[3].iter().any(|&c| !(b'!'..=b'~').contains(&c)) {
        return Err(CmdError::err(format_args!(
            "{what} cannot contain spaces, newlines or special characters."
        )));
    }
    ctx.out.ok();
    Ok(())
}

/// CLIENT REPLY ON|OFF|SKIP. OFF and SKIP write no reply of their own; the dispatcher drops the
/// replies they silence (`cmd::gate_reply`).
fn client_reply(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let mode = &args[2];
    if mode.eq_ignore_ascii_case(b"on") {
        ctx.session.reply_mode = ReplyMode::On;
        ctx.out.ok();
    } else if mode.eq_ignore_ascii_case(b"off") {
        ctx.session.reply_mode = ReplyMode::Off;
    } else if mode.eq_ignore_ascii_case(b"skip") {
        if ctx.session.reply_mode != ReplyMode::Off {
            ctx.session.reply_mode = ReplyMode::SkipNext;
        }
    } else {
        return Err(CmdError::syntax());
    }
    Ok(())
}

/// CLIENT PAUSE timeout [WRITE|ALL] (milliseconds).
fn client_pause(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    use crate::pause::PauseMode;
    let timeout = kvik_resp::parse_i64(&args[2])
        .ok_or_else(|| CmdError::err("timeout is not an integer or out of range"))?;
    if timeout < 0 {
        return Err(CmdError::err("timeout is negative"));
    }
    let mode = match args.get(3) {
        _ if args.len() > 4 => {
            return Err(CmdError::err(format_args!(
                "unknown subcommand or wrong number of arguments for '{}'. Try CLIENT HELP.",
                String::from_utf8_lossy(&args[1])
            )))
        }
        None => PauseMode::All,
        Some(m) if m.eq_ignore_ascii_case(b"write") => PauseMode::Write,
        Some(m) if m.eq_ignore_ascii_case(b"all") => PauseMode::All,
        Some(_) => return Err(CmdError::err("CLIENT PAUSE mode must be WRITE or ALL")),
    };
    let until = ctx.now_ms.saturating_add(timeout as u64);
    ctx.server.pause.pause(mode, until);
    ctx.out.ok();
    Ok(())
}

fn client_unpause(ctx: &mut Ctx<'_>, _args: &Args) -> CmdResult {
    unpause_on(ctx.server, ctx.out)
}

fn unpause_on(server: &crate::server::Server, out: &mut super::ctx::Reply) -> CmdResult {
    server.pause.unpause();
    for io in server.io_handles.get().into_iter().flatten() {
        io.wake(); // held connections are tried again at once
    }
    out.ok();
    Ok(())
}

/// CLIENT UNPAUSE is answered on the I/O thread (see `crate::pause`): paused writes may hold
/// every worker.
pub(crate) fn on_io_thread(entry: &super::Entry) -> Option<super::script::IoServe> {
    (entry.full_name == "client|unpause").then_some(super::script::IoServe::Run(unpause_on))
}

/// CLIENT TRACKING ON|OFF [REDIRECT id] [PREFIX p ...] [BCAST] [OPTIN] [OPTOUT] [NOLOOP], with
/// Redis 7.0's checks in its order.
fn client_tracking(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let mut mode = Mode::default();
    let mut i = 3;
    while i < args.len() {
        let opt = &args[i];
        let more = i + 1 < args.len();
        if opt.eq_ignore_ascii_case(b"redirect") && more {
            i += 1;
            if mode.redirect != 0 {
                return Err(CmdError::err(
                    "A client can only redirect to a single other client",
                ));
            }
            let id = kvik_resp::parse_i64(&args[i]).ok_or(CmdError::not_integer())?;
            if id <= 0 || ctx.server.clients.get(id as u64).is_none() {
                return Err(CmdError::err(
                    "The client ID you want redirect to does not exist",
                ));
            }
            mode.redirect = id as u64;
        } else if opt.eq_ignore_ascii_case(b"bcast") {
            mode.bcast = true;
        } else if opt.eq_ignore_ascii_case(b"optin") {
            mode.optin = true;
        } else if opt.eq_ignore_ascii_case(b"optout") {
            mode.optout = true;
        } else if opt.eq_ignore_ascii_case(b"noloop") {
            mode.noloop = true;
        } else if opt.eq_ignore_ascii_case(b"prefix") && more {
            i += 1;
            mode.prefixes.push(args[i].to_vec());
        } else {
            return Err(CmdError::syntax());
        }
        i += 1;
    }
    let state = &args[2];
    if state.eq_ignore_ascii_case(b"off") {
        ctx.session.tracking = None; // its drop unregisters it
        ctx.out.ok();
        return Ok(());
    }
    if !state.eq_ignore_ascii_case(b"on") {
        return Err(CmdError::syntax());
    }
    check_tracking_options(ctx, &mode)?;
    match ctx.session.tracking.as_mut() {
        Some(t) => t.update(mode),
        None => {
            let t = SessionTracking::enable(&ctx.server.tracking, &ctx.session.client, mode);
            ctx.session.tracking = Some(t);
        }
    }
    ctx.out.ok();
    Ok(())
}

/// CLIENT TRACKING ON's consistency checks, against each other and the current mode.
fn check_tracking_options(ctx: &Ctx<'_>, mode: &Mode) -> CmdResult {
    if !mode.bcast && !mode.prefixes.is_empty() {
        return Err(CmdError::err(
            "PREFIX option requires BCAST mode to be enabled",
        ));
    }
    let current = ctx.server.tracking.mode(ctx.session.id());
    if current.as_ref().is_some_and(|c| c.bcast != mode.bcast) {
        return Err(CmdError::err(
            "You can't switch BCAST mode on/off before disabling tracking for this client, \
             and then re-enabling it with a different mode.",
        ));
    }
    if mode.bcast && (mode.optin || mode.optout) {
        return Err(CmdError::err(
            "OPTIN and OPTOUT are not compatible with BCAST",
        ));
    }
    if mode.optin && mode.optout {
        return Err(CmdError::err(
            "You can't specify both OPTIN mode and OPTOUT mode",
        ));
    }
    if current
        .as_ref()
        .is_some_and(|c| (mode.optin && c.optout) || (mode.optout && c.optin))
    {
        return Err(CmdError::err(
            "You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, \
             and then re-enabling it with a different mode.",
        ));
    }
    if mode.bcast {
        let existing = current.as_ref().map_or(&[][..], |c| &c.prefixes[..]);
        for (i, p) in mode.prefixes.iter().enumerate() {
            if let Some(e) = existing.iter().find(|e| overlaps(e, p)) {
                return Err(prefix_overlap(p, "an existing", e));
            }
            if let Some(o) = mode.prefixes[i + 1..].iter().find(|o| overlaps(o, p)) {
                return Err(prefix_overlap(p, "another provided", o));
            }
        }
    }
    Ok(())
}

/// Whether one prefix is a prefix of the other (Redis's `stringCheckPrefix`).
fn overlaps(a: &[u8], b: &[u8]) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

fn prefix_overlap(p: &[u8], which: &str, other: &[u8]) -> CmdError {
    CmdError::err(format_args!(
        "Prefix '{}' overlaps with {which} prefix '{}'. Prefixes for a single client must not overlap.",
        String::from_utf8_lossy(p),
        String::from_utf8_lossy(other)
    ))
}

/// CLIENT CACHING YES|NO: for the next command (or transaction) of an OPTIN / OPTOUT client.
fn client_caching(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let Some(t) = ctx.session.tracking.as_mut() else {
        return Err(CmdError::err(
            "CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled",
        ));
    };
    let opt = &args[2];
    if opt.eq_ignore_ascii_case(b"yes") {
        if !t.optin {
            return Err(CmdError::err(
                "CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.",
            ));
        }
    } else if opt.eq_ignore_ascii_case(b"no") {
        if !t.optout {
            return Err(CmdError::err(
                "CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.",
            ));
        }
    } else {
        return Err(CmdError::syntax());
    }
    t.caching = true;
    ctx.out.ok();
    Ok(())
}

/// CLIENT GETREDIR: the redirect id, 0 when tracking without one, -1 when not tracking.
fn client_getredir(ctx: &mut Ctx<'_>, _args: &Args) -> CmdResult {
    ctx.out.int(ctx.session.client.state.redir.load(Relaxed));
    Ok(())
}

/// CLIENT TRACKINGINFO: a map of `flags` (a set), `redirect` and `prefixes`.
fn client_trackinginfo(ctx: &mut Ctx<'_>, _args: &Args) -> CmdResult {
    let mode = ctx.server.tracking.mode(ctx.session.id());
    let caching = ctx.session.tracking.as_ref().is_some_and(|t| t.caching);
    let mut flags: Vec<&str> = Vec::new();
    match &mode {
        None => flags.push("off"),
        Some(m) => {
            flags.push("on");
            let table = [
                ("bcast", m.bcast),
                ("optin", m.optin),
                ("caching-yes", m.optin && caching),
                ("optout", m.optout),
                ("caching-no", m.optout && caching),
                ("noloop", m.noloop),
                ("broken_redirect", m.broken.load(Relaxed)),
            ];
            flags.extend(table.iter().filter(|(_, on)| *on).map(|(f, _)| *f));
        }
    }
    let out = &mut *ctx.out;
    out.map(3);
    out.bulk(b"flags");
    out.set(flags.len());
    for f in flags {
        out.bulk(f.as_bytes());
    }
    out.bulk(b"redirect");
    out.int(mode.as_ref().map_or(-1, |m| m.redirect as i64));
    out.bulk(b"prefixes");
    let prefixes = mode.as_ref().map_or(&[][..], |m| &m.prefixes[..]);
    out.array(prefixes.len());
    for p in prefixes {
        out.bulk(p);
    }
    Ok(())
}

fn client_help(ctx: &mut Ctx<'_>, _args: &Args) -> CmdResult {
    help_reply(
        ctx.out,
        "CLIENT",
        &[
            "GETNAME",
            "    Return the name of the current connection.",
            "ID",
            "    Return the ID of the current connection.",
            "INFO",
            "    Return information about the current client connection.",
            "KILL <ip:port>",
            "    Kill connection made from <ip:port>.",
            "KILL <option> <value> [<option> <value> [...]]",
            "    Kill connections. Options are:",
            "    * ADDR (<ip:port>|<unixsocket>:0)",
            "      Kill connections made from the specified address",
            "    * LADDR (<ip:port>|<unixsocket>:0)",
            "      Kill connections made to specified local address",
            "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
            "      Kill connections by type.",
            "    * USER <username>",
            "      Kill connections authenticated by <username>.",
            "    * SKIPME (YES|NO)",
            "      Skip killing current connection (default: yes).",
            "    * ID <client-id>",
            "      Kill connections by client id.",
            "LIST [options ...]",
            "    Return information about client connections. Options:",
            "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
            "      Return clients of specified type.",
            "    * ID <client-id> [<client-id> ...]",
            "      Return clients with the given ids.",
            "PAUSE <timeout> [WRITE|ALL]",
            "    Suspend all, or just write, clients for <timeout> milliseconds.",
            "REPLY (ON|OFF|SKIP)",
            "    Control the replies sent to the current connection.",
            "SETNAME <name>",
            "    Assign the name <name> to the current connection.",
            "UNBLOCK <clientid> [TIMEOUT|ERROR]",
            "    Unblock the specified blocked client.",
            "TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> [...]]",
            "         [OPTIN] [OPTOUT] [NOLOOP]",
            "    Control server assisted client side caching.",
            "TRACKINGINFO",
            "    Report tracking status for the current connection.",
            "CACHING (YES|NO)",
            "    Enable/disable tracking of the keys for next command in OPTIN/OPTOUT modes.",
            "GETREDIR",
            "    Return the client ID we are redirecting to when tracking is enabled.",
            "UNPAUSE",
            "    Stop the current client pause, resuming traffic.",
            "SETINFO <LIB-NAME|LIB-VER> <value>",
            "    Set client library name or version (accepted, not shown).",
            "NO-EVICT (ON|OFF)",
            "    Protect current client connection from eviction (kvik never evicts clients).",
            "NO-TOUCH (ON|OFF)",
            "    Do not touch the LRU/LFU of accessed keys (no effect in kvik).",
        ],
    );
    Ok(())
}
