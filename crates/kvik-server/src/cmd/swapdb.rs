//! SWAPDB index1 index2: two databases trade their contents in O(1).
//!
//! No key is rewritten: storage swaps two entries of its logical-to-disk database table
//! (`storage::dbmap`, one synced record). Clients stay in the database they selected and now
//! see the other contents; the hot cache is keyed by on-disk database, so it never answers for
//! the wrong one. As in Redis 7.0, the watchers of keys that existed in either database are
//! touched (`WatchRegistry::dbs_swapped`) and clients blocked on keys of either database are
//! served if their key now holds data of the right type. Refused in cluster mode, which has
//! only database 0.

use super::ctx::{Args, CmdError, CmdResult, Ctx};
use super::spec::{CacheEffect, CommandSpec, Flags, KeySpec};
use crate::watch::Stored;

pub static COMMANDS: &[CommandSpec] = &[CommandSpec::new(
    "swapdb",
    3,
    Flags::WRITE.union(Flags::FAST),
    KeySpec::NONE,
    swapdb,
)
.no_events()
.cache(CacheEffect::Remap)
.acl(&["keyspace", "write", "fast", "dangerous"])
.group("server")
.doc(
    "Swaps two Redis databases.",
    "4.0.0",
    "O(N) where N is the count of clients watching or blocking on keys from both databases.",
)];

/// A database index as SWAPDB reads it: a C int, else `ERR <what>`; range is checked after both.
fn parse_index(arg: &[u8], what: &'static str) -> Result<i64, CmdError> {
    kvik_resp::parse_i64(arg)
        .filter(|n| i32::try_from(*n).is_ok())
        .ok_or(CmdError::fixed(what))
}

fn swapdb(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    if ctx.server.cluster.node().is_some() {
        return Err(CmdError::fixed("SWAPDB is not allowed in cluster mode"));
    }
    let a = parse_index(&args[1], "invalid first DB index")?;
    let b = parse_index(&args[2], "invalid second DB index")?;
    let databases = ctx.server.config.databases() as i64;
    if !(0..databases).contains(&a) || !(0..databases).contains(&b) {
        return Err(CmdError::db_out_of_range());
    }
    let (a, b) = (a as u16, b as u16);
    if a != b {
        let server = ctx.server;
        let storage = &server.storage;
        let now = ctx.now_ms;
        storage.swap_dbs(a, b, || {
            server.watches.dbs_swapped(a, b, |db, key| {
                match storage.get_meta(storage.dbs().physical(db), key) {
                    Ok(Some(m)) if m.is_expired(now) => Stored::Expired,
                    Ok(Some(_)) => Stored::Live,
                    Ok(None) => Stored::Absent,
                    // Unreadable: count it as present, so the watcher aborts rather than
                    // missing a change.
                    Err(_) => Stored::Live,
                }
            });
            server.blocking.wake_dbs(&[a, b]);
        })?;
    }
    ctx.out.ok();
    Ok(())
}
