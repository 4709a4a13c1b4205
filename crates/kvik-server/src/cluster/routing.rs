//! The per-command cluster check, made by the dispatcher right after auth (Redis's
//! `getNodeByQuery` rules): every key must hash to one slot (CROSSSLOT), the slot must be served
//! (CLUSTERDOWN) and served here (MOVED), except during a migration:
//! - slot MIGRATING here: served if every key exists; ASK to the target if none does; TRYAGAIN
//!   when some do and some do not;
//! - slot IMPORTING here: served only for a client that sent ASKING just before (or
//!   RESTORE-ASKING); TRYAGAIN for several keys not all present; otherwise MOVED to the owner.
//!
//! A replica (in the topology) redirects to its primary like any non-owner, except that a
//! connection that sent READONLY has its reads of the primary's slots served here (Redis
//! Cluster's replica reads; READWRITE ends it).
//!
//! Keyless commands are never redirected. On the run-to-completion path the check needs no
//! storage for a stable slot; a migrating or importing slot (which needs key lookups), or a
//! pending ASKING flag, sends the command to the pool untouched.

use super::replies::redirect_host;
use super::{ClusterSettings, Gate, Node};
use crate::error::{CmdError, ErrorKind};
use crate::session::Session;
use crate::storage::Storage;
use bytes::Bytes;
use kvik_resp::cluster::key_slot;
use std::sync::atomic::Ordering::Relaxed;

/// How a command is routed in cluster mode: a field of its command spec.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Routing {
    /// By the slot of its keys; keyless commands are served anywhere.
    Keys,
    /// ASKING: served anywhere, and the ASKING flag it sets survives it (it lasts one command
    /// for every other command).
    Asking,
    /// RESTORE-ASKING: routed by its key as if ASKING had been sent just before.
    Asked,
    /// MIGRATE: takes its slot's gate exclusively and is served on a migrating slot whatever
    /// its keys.
    Migrate,
    /// SELECT: keyless, but any database other than 0 is refused in cluster mode.
    DbZeroOnly,
}

/// What the check decided.
pub enum Route<'a> {
    /// Run the command here, holding the slot gate (if any) until it is done.
    Serve(Option<Gate<'a>>),
    /// Run-to-completion only: let the pool decide (nothing was changed).
    NotServed,
    /// Reply with this error instead of running the command.
    Reject(CmdError),
}

/// One command as the check sees it: its spec's routing rule and the positions of its keys in
/// `args`.
pub struct Request<'r> {
    pub routing: Routing,
    pub positions: &'r [usize],
    pub args: &'r [Bytes],
    /// True on the run-to-completion path (no storage may be read).
    pub rtc: bool,
    /// The command may write (a replica never serves it).
    pub write: bool,
    pub now_ms: u64,
}

/// Checks one command in cluster mode.
pub fn check<'a>(
    node: &'a Node,
    settings: &ClusterSettings,
    storage: &Storage,
    session: &mut Session,
    req: &Request<'_>,
) -> Route<'a> {
    let Request {
        routing,
        positions,
        args,
        rtc,
        write,
        now_ms,
    } = *req;
    let mut asked = session.asking;
    if routing != Routing::Asking {
        if asked && rtc {
            return Route::NotServed;
        }
        // The flag lasts one command.
        session.asking = false;
    }
    if routing == Routing::DbZeroOnly {
        if let Some(db) = kvik_resp::parse_i64(&args[1]) {
            if db != 0 && i32::try_from(db).is_ok() {
                return Route::Reject(CmdError::err("SELECT is not allowed in cluster mode"));
            }
        }
        return Route::Serve(None);
    }
    asked |= routing == Routing::Asked;
    if positions.is_empty() {
        return Route::Serve(None);
    }
    let mut st = node.state.read();
    let mut first: Option<&[u8]> = None;
    let mut slot = 0u16;
    let mut owner = 0usize;
    let (mut migrating, mut importing, mut multiple) = (false, false, false);
    for &p in positions {
        let key: &[u8] = &args[p];
        let s = key_slot(key);
        match first {
            None => {
                first = Some(key);
                slot = s;
                let Some(o) = st.owner_of(s) else {
                    return Route::Reject(CmdError::new(
                        ErrorKind::ClusterDown,
                        "Hash slot not served",
                    ));
                };
                owner = o;
                migrating = st.me == Some(o) && st.migrating.contains_key(&s);
                importing = !migrating && st.importing.contains_key(&s);
            }
            Some(f) if f != key => {
                if s != slot {
                    return Route::Reject(CmdError::new(
                        ErrorKind::CrossSlot,
                        "Keys in request don't hash to the same slot",
                    ));
                }
                multiple = true;
            }
            Some(_) => {}
        }
    }
    if !st.ok(settings.require_full_coverage.load(Relaxed)) {
        return Route::Reject(CmdError::new(ErrorKind::ClusterDown, "The cluster is down"));
    }
    let kind = settings.endpoint();
    if migrating || importing {
        if rtc {
            return Route::NotServed;
        }
        // Taken before the keys are looked at and held while the command runs (see Node).
        drop(st);
        let migrate = routing == Routing::Migrate;
        let gate = node.gate(slot, migrate);
        if migrate {
            return Route::Serve(Some(gate));
        }
        st = node.state.read();
        // The state may have changed while the gate was awaited: look the owner up again.
        let Some(o) = st.owner_of(slot) else {
            return Route::Reject(CmdError::new(
                ErrorKind::ClusterDown,
                "Hash slot not served",
            ));
        };
        owner = o;
        let (mut missing, mut present) = (0, 0);
        for &p in positions {
            match storage.get_live(0, &args[p], now_ms) {
                Ok(Some(_)) => present += 1,
                Ok(None) => missing += 1,
                Err(e) => return Route::Reject(CmdError::storage(e)),
            }
        }
        if migrating && missing > 0 {
            if present > 0 {
                return Route::Reject(tryagain());
            }
            let target = st.migrating.get(&slot).and_then(|id| st.topology.node(id));
            if let Some(n) = target {
                return Route::Reject(redirect(ErrorKind::Ask, slot, &n.host, n.port, kind));
            }
        }
        if importing && asked {
            return if multiple && missing > 0 {
                Route::Reject(tryagain())
            } else {
                Route::Serve(Some(gate))
            };
        }
        if st.me == Some(owner) {
            return Route::Serve(Some(gate));
        }
    }
    if st.me == Some(owner) {
        return Route::Serve(None);
    }
    if session.readonly && !write && st.my_primary == Some(owner) {
        return Route::Serve(None);
    }
    let n = &st.topology.nodes[owner];
    Route::Reject(redirect(ErrorKind::Moved, slot, &n.host, n.port, kind))
}

fn tryagain() -> CmdError {
    CmdError::new(
        ErrorKind::TryAgain,
        "Multiple keys request during rehashing of slot",
    )
}

fn redirect(
    what: ErrorKind,
    slot: u16,
    host: &str,
    port: u16,
    kind: super::EndpointKind,
) -> CmdError {
    let host = redirect_host(host, kind);
    CmdError::with(what, format_args!("{slot} {host}:{port}"))
}
