//! The per-command cluster check, made by the dispatcher right after auth (Redis's
//! `getNodeByQuery` rules): every key must hash to one slot (CROSSSLOT), the slot must be served
//! (CLUSTERDOWN) and served here (MOVED), except during a migration:
//! - slot MIGRATING here: served if every key exists; ASK to the target if none does; TRYAGAIN
//!   when some do and some do not;
//! - slot IMPORTING here: served only for a client that sent ASKING just before (or
//!   RESTORE-ASKING); TRYAGAIN for several keys not all present; otherwise MOVED to the owner.
//!
//! Keyless commands are never redirected. On the run-to-completion path the check needs no
//! storage for a stable slot; a migrating or importing slot (which needs key lookups), or a
//! pending ASKING flag, sends the command to the pool untouched.

use super::replies::redirect_host;
use super::{Gate, Node};
use crate::cmd::ctx::CmdError;
use crate::cmd::Entry;
use crate::server::Server;
use crate::session::Session;
use bytes::Bytes;
use kvik_resp::cluster::key_slot;
use std::sync::atomic::Ordering::Relaxed;

/// What the check decided.
pub enum Route<'a> {
    /// Run the command here, holding the slot gate (if any) until it is done.
    Serve(Option<Gate<'a>>),
    /// Run-to-completion only: let the pool decide (nothing was changed).
    NotServed,
    /// Reply with this error instead of running the command.
    Reject(CmdError),
}

/// Checks one command in cluster mode. `rtc` is true on the run-to-completion path.
pub fn check<'a>(
    node: &'a Node,
    server: &Server,
    session: &mut Session,
    entry: &Entry,
    args: &[Bytes],
    rtc: bool,
    now_ms: u64,
) -> Route<'a> {
    let name = entry.full_name.as_str();
    let mut asked = session.asking;
    if name != "asking" {
        if asked && rtc {
            return Route::NotServed;
        }
        // The flag lasts one command.
        session.asking = false;
    }
    if name == "select" {
        if let Some(db) = kvik_resp::parse_i64(&args[1]) {
            if db != 0 && i32::try_from(db).is_ok() {
                return Route::Reject(CmdError::err("SELECT is not allowed in cluster mode"));
            }
        }
        return Route::Serve(None);
    }
    asked |= name == "restore-asking";
    let positions = entry.spec.key_positions(args);
    if positions.is_empty() {
        return Route::Serve(None);
    }
    let mut st = node.state.read();
    let mut first: Option<&[u8]> = None;
    let mut slot = 0u16;
    let mut owner = 0usize;
    let (mut migrating, mut importing, mut multiple) = (false, false, false);
    for &p in &positions {
        let key: &[u8] = &args[p];
        let s = key_slot(key);
        match first {
            None => {
                first = Some(key);
                slot = s;
                let Some(o) = st.owner_of(s) else {
                    return Route::Reject(CmdError::full("CLUSTERDOWN Hash slot not served"));
                };
                owner = o;
                migrating = st.me == Some(o) && st.migrating.contains_key(&s);
                importing = !migrating && st.importing.contains_key(&s);
            }
            Some(f) if f != key => {
                if s != slot {
                    return Route::Reject(CmdError::full(
                        "CROSSSLOT Keys in request don't hash to the same slot",
                    ));
                }
                multiple = true;
            }
            Some(_) => {}
        }
    }
    let settings = &server.config.cluster;
    if !st.ok(settings.require_full_coverage.load(Relaxed)) {
        return Route::Reject(CmdError::full("CLUSTERDOWN The cluster is down"));
    }
    let kind = settings.endpoint();
    if migrating || importing {
        if rtc {
            return Route::NotServed;
        }
        // Taken before the keys are looked at and held while the command runs (see Node).
        drop(st);
        let gate = node.gate(slot, name == "migrate");
        if name == "migrate" {
            return Route::Serve(Some(gate));
        }
        st = node.state.read();
        // The state may have changed while the gate was awaited: look the owner up again.
        let Some(o) = st.owner_of(slot) else {
            return Route::Reject(CmdError::full("CLUSTERDOWN Hash slot not served"));
        };
        owner = o;
        let (mut missing, mut present) = (0, 0);
        for &p in &positions {
            match server.storage.get_live(0, &args[p], now_ms) {
                Ok(Some(_)) => present += 1,
                Ok(None) => missing += 1,
                Err(e) => return Route::Reject(CmdError::from(e)),
            }
        }
        if migrating && missing > 0 {
            if present > 0 {
                return Route::Reject(tryagain());
            }
            let target = st.migrating.get(&slot).and_then(|id| st.topology.node(id));
            if let Some(n) = target {
                return Route::Reject(redirect("ASK", slot, &n.host, n.port, kind));
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
    let n = &st.topology.nodes[owner];
    Route::Reject(redirect("MOVED", slot, &n.host, n.port, kind))
}

fn tryagain() -> CmdError {
    CmdError::full("TRYAGAIN Multiple keys request during rehashing of slot")
}

fn redirect(what: &str, slot: u16, host: &str, port: u16, kind: super::EndpointKind) -> CmdError {
    CmdError(format!("{what} {slot} {}:{port}", redirect_host(host, kind)).into())
}
