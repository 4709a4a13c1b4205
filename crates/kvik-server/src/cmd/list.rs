//! List commands, blocking ones included (Redis's `list` group).
//!
//! Storage: the element at position `p` is the data CF member [`list_index`]`(p)`; the meta
//! record holds `head` (position of the first element) and `len`, so element `i` (0-based from
//! the head) lives at `head + i`. A new list starts with `head` at [`LIST_MIDDLE`], so both ends
//! can grow for 2^63 pushes.
//!
//! Costs:
//! - LPUSH RPUSH LPUSHX RPUSHX LPOP RPOP (and the pop/push halves of LMOVE, LMPOP and the
//!   blocking commands): O(1) per element, one member write plus the meta put;
//! - LINDEX LSET: O(1) point read / write by position; LLEN O(1) (the meta record);
//! - LRANGE: one seek then a cursor walk over the returned range;
//! - LRANGE, LINDEX and LLEN of a list whose head the hot cache holds (`cache::CachedList`,
//!   filled by the reads of its first elements): from memory, on the I/O thread. The pushes,
//!   pops and LTRIM edit that copy with their commit ([`put_edited`]); other writes drop it;
//! - LTRIM: deletes only the positions it drops (O(dropped)); trimming everything is O(1);
//! - LINSERT: O(N): finds the pivot by walking from the head, then shifts the shorter side
//!   (the elements before the insertion point move one position left, or the ones after it one
//!   position right);
//! - LREM: O(N): walks the list from the end it removes from and moves every survivor after the
//!   first removed element;
//! - LPOS: O(N) walk from the end its RANK selects, bounded by MAXLEN.
//!
//! Every write commits the key's meta record in the same batch (a put with the new length, or a
//! delete when the list became empty: Redis never keeps an empty list); that put is what updates
//! the cache, marks WATCHers dirty and wakes blocked clients ([`crate::blocking`]).
//!
//! Blocking commands (BLPOP BRPOP BLMOVE BRPOPLPUSH BLMPOP) run their non-blocking twin's code
//! under their keys' locks and call [`Ctx::block_on`] when there is nothing to pop. When a worker
//! re-runs one to serve it, a key that holds another type is skipped rather than answered with
//! WRONGTYPE: Redis 7.0 keeps such a client blocked.

use super::blocked::parse_timeout;
use super::cached::KeyReads;
use super::collection::{index_range, notify_write};
use super::ctx::{Args, CmdError, CmdResult, Ctx, ListRead};
use super::spec::{numkeys_at_1, numkeys_at_2, Class, CommandSpec, Flags, KeySpec};
use crate::blocking::TimeoutReply;
use crate::cache::{CollUpdate, ListEdit};
use crate::storage::encoding::{list_index, Kind, Meta};
use crate::storage::{Batch, Cf, Coll, Storage, View};
use bytes::Bytes;
use kvik_resp::parse_i64;

const READ: Flags = Flags::READONLY;
const READ_FAST: Flags = Flags::READONLY.union(Flags::FAST);
const WRITE: Flags = Flags::WRITE;
const WRITE_FAST: Flags = Flags::WRITE.union(Flags::FAST);
const WRITE_OOM: Flags = Flags::WRITE.union(Flags::DENYOOM);
const WRITE_OOM_FAST: Flags = WRITE_OOM.union(Flags::FAST);
const BLOCKING: Flags = Flags::WRITE.union(Flags::BLOCKING);
const BLOCKING_OOM: Flags = BLOCKING.union(Flags::DENYOOM);
/// BLPOP, BRPOP, BLMOVE, BRPOPLPUSH carry Redis 7.0's `noscript` flag (BLMPOP does not).
const BLOCKING_NOSCRIPT: Flags = BLOCKING.union(Flags::NOSCRIPT);
const BLOCKING_OOM_NOSCRIPT: Flags = BLOCKING_OOM.union(Flags::NOSCRIPT);

const ACL_READ_FAST: &[&str] = &["read", "list", "fast"];
const ACL_READ_SLOW: &[&str] = &["read", "list", "slow"];
const ACL_WRITE_FAST: &[&str] = &["write", "list", "fast"];
const ACL_WRITE_SLOW: &[&str] = &["write", "list", "slow"];
const ACL_BLOCKING: &[&str] = &["write", "list", "slow", "blocking"];

const fn l(
    name: &'static str,
    arity: i32,
    flags: Flags,
    keys: KeySpec,
    handler: super::spec::Handler,
    acl: &'static [&'static str],
) -> CommandSpec {
    super::spec::collection_command("list", name, arity, flags, keys, handler, acl)
}

pub static COMMANDS: &[CommandSpec] = &[
    l("lpush", -3, WRITE_OOM_FAST, KeySpec::ONE, lpush, ACL_WRITE_FAST)
.rtc_write()
.event(Class::List, "lpush").doc(
        "Prepends one or more elements to a list. Creates the key if it doesn't exist.",
        "1.0.0",
        "O(1) for each element added, so O(N) to add N elements when the command is called with multiple arguments.",
    ),
    l("rpush", -3, WRITE_OOM_FAST, KeySpec::ONE, rpush, ACL_WRITE_FAST)
.rtc_write()
.event(Class::List, "rpush").doc(
        "Appends one or more elements to a list. Creates the key if it doesn't exist.",
        "1.0.0",
        "O(1) for each element added, so O(N) to add N elements when the command is called with multiple arguments.",
    ),
    l("lpushx", -3, WRITE_OOM_FAST, KeySpec::ONE, lpushx, ACL_WRITE_FAST)
.rtc_write()
.event(Class::List, "lpush").doc(
        "Prepends one or more elements to a list only when the list exists.",
        "2.2.0",
        "O(1) for each element added, so O(N) to add N elements when the command is called with multiple arguments.",
    ),
    l("rpushx", -3, WRITE_OOM_FAST, KeySpec::ONE, rpushx, ACL_WRITE_FAST)
.rtc_write()
.event(Class::List, "rpush").doc(
        "Appends an element to a list only when the list exists.",
        "2.2.0",
        "O(1) for each element added, so O(N) to add N elements when the command is called with multiple arguments.",
    ),
    l("lpop", -2, WRITE_FAST, KeySpec::ONE, lpop, ACL_WRITE_FAST)
.rtc_write()
.event(Class::List, "lpop")
.event(Class::Generic, "del").doc(
        "Returns the first elements in a list after removing it. Deletes the list if the last element was popped.",
        "1.0.0",
        "O(N) where N is the number of elements returned",
    ),
    l("rpop", -2, WRITE_FAST, KeySpec::ONE, rpop, ACL_WRITE_FAST)
.rtc_write()
.event(Class::List, "rpop")
.event(Class::Generic, "del").doc(
        "Returns and removes the last elements of a list. Deletes the list if the last element was popped.",
        "1.0.0",
        "O(N) where N is the number of elements returned",
    ),
    l("llen", 2, READ_FAST, KeySpec::ONE, |c, a| llen(c, a), ACL_READ_FAST)
        .rtc(|c, a| llen(c, a))
        .rtc_storage()
        .doc(
        "Returns the length of a list.",
        "1.0.0",
        "O(1)",
    ),
    l("lindex", 3, READ, KeySpec::ONE, |c, a| lindex(c, a), ACL_READ_SLOW)
        .rtc(|c, a| lindex(c, a))
        .rtc_storage()
        .doc(
        "Returns an element from a list by its index.",
        "1.0.0",
        "O(1): kvik reads the element at its position directly.",
    ),
    l("lset", 4, WRITE_OOM, KeySpec::ONE, lset, ACL_WRITE_SLOW)
.event(Class::List, "lset").doc(
        "Sets the value of an element in a list by its index.",
        "1.0.0",
        "O(1): kvik writes the element at its position directly.",
    ),
    l("linsert", 5, WRITE_OOM, KeySpec::ONE, linsert, ACL_WRITE_SLOW)
.event(Class::List, "linsert").doc(
        "Inserts an element before or after another element in a list.",
        "2.2.0",
        "O(N) where N is the number of elements to traverse before seeing the value pivot, plus the elements kvik shifts (the shorter side of the insertion point).",
    ),
    l("lrange", 4, READ, KeySpec::ONE, |c, a| lrange(c, a), ACL_READ_SLOW)
        .rtc(|c, a| lrange(c, a))
        .doc(
        "Returns a range of elements from a list.",
        "1.0.0",
        "O(S+N) where S is the distance of start offset from HEAD for small lists, from nearest end (HEAD or TAIL) for large lists; and N is the number of elements in the specified range.",
    ),
    l("lrem", 4, WRITE, KeySpec::ONE, lrem, ACL_WRITE_SLOW)
.event(Class::List, "lrem")
.event(Class::Generic, "del").doc(
        "Removes elements from a list. Deletes the list if the last element was removed.",
        "1.0.0",
        "O(N+M) where N is the length of the list and M is the number of elements removed.",
    ),
    l("ltrim", 4, WRITE, KeySpec::ONE, ltrim, ACL_WRITE_SLOW)
.event(Class::List, "ltrim")
.event(Class::Generic, "del").doc(
        "Removes elements from both ends a list. Deletes the list if all elements were trimmed.",
        "1.0.0",
        "O(N) where N is the number of elements to be removed by the operation.",
    ),
    l("lpos", -3, READ, KeySpec::ONE, lpos, ACL_READ_SLOW).doc(
        "Returns the index of matching elements in a list.",
        "6.0.6",
        "O(N) where N is the number of elements in the list, for the average case. When searching for elements near the head or the tail of the list, or when the MAXLEN option is provided, the command may run in constant time.",
    ),
    l("lmove", 5, WRITE_OOM, KeySpec::TWO, lmove, ACL_WRITE_SLOW)
.event(Class::List, "lpop")
.event(Class::List, "rpop")
.event(Class::List, "lpush")
.event(Class::List, "rpush")
.event(Class::Generic, "del").doc(
        "Returns an element after popping it from one list and pushing it to another. Deletes the list if the last element was moved.",
        "6.2.0",
        "O(1)",
    ),
    l("rpoplpush", 3, WRITE_OOM, KeySpec::TWO, rpoplpush, ACL_WRITE_SLOW)
.event(Class::List, "rpop")
.event(Class::List, "lpush")
.event(Class::Generic, "del").doc(
        "Returns the last element of a list after removing and pushing it to another list. Deletes the list if the last element was popped.",
        "1.2.0",
        "O(1)",
    ),
    l("lmpop", -4, WRITE, KeySpec::NONE, lmpop, ACL_WRITE_SLOW)
.event(Class::List, "lpop")
.event(Class::List, "rpop")
.event(Class::Generic, "del")
        .movable(numkeys_at_1)
        .doc(
            "Returns multiple elements from a list after removing them. Deletes the list if the last element was popped.",
            "7.0.0",
            "O(N+M) where N is the number of provided keys and M is the number of elements returned.",
        ),
    l("blpop", -3, BLOCKING_NOSCRIPT, KeySpec::ALL_BUT_LAST, blpop, ACL_BLOCKING)
.event(Class::List, "lpop")
.event(Class::Generic, "del").doc(
        "Removes and returns the first element in a list. Blocks until an element is available otherwise. Deletes the list if the last element was popped.",
        "2.0.0",
        "O(N) where N is the number of provided keys.",
    ),
    l("brpop", -3, BLOCKING_NOSCRIPT, KeySpec::ALL_BUT_LAST, brpop, ACL_BLOCKING)
.event(Class::List, "rpop")
.event(Class::Generic, "del").doc(
        "Removes and returns the last element in a list. Blocks until an element is available otherwise. Deletes the list if the last element was popped.",
        "2.0.0",
        "O(N) where N is the number of provided keys.",
    ),
    l("blmove", 6, BLOCKING_OOM_NOSCRIPT, KeySpec::TWO, blmove, ACL_BLOCKING)
.event(Class::List, "lpop")
.event(Class::List, "rpop")
.event(Class::List, "lpush")
.event(Class::List, "rpush")
.event(Class::Generic, "del").doc(
        "Pops an element from a list, pushes it to another list and returns it. Blocks until an element is available otherwise. Deletes the list if the last element was moved.",
        "6.2.0",
        "O(1)",
    ),
    l("brpoplpush", 4, BLOCKING_OOM_NOSCRIPT, KeySpec::TWO, brpoplpush, ACL_BLOCKING)
.event(Class::List, "rpop")
.event(Class::List, "lpush")
.event(Class::Generic, "del").doc(
        "Pops an element from a list, pushes it to another list and returns it. Block until an element is available otherwise. Deletes the list if the last element was popped.",
        "2.2.0",
        "O(1)",
    ),
    l("blmpop", -5, BLOCKING, KeySpec::NONE, blmpop, ACL_BLOCKING)
.event(Class::List, "lpop")
.event(Class::List, "rpop")
.event(Class::Generic, "del")
        .movable(numkeys_at_2)
        .doc(
            "Pops the first element from one of multiple lists. Blocks until an element is available otherwise. Deletes the list if the last element was popped.",
            "7.0.0",
            "O(N+M) where N is the number of provided keys and M is the number of elements returned.",
        ),
];

// ---- storage helpers ---------------------------------------------------------------------------

/// One end of a list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum End {
    Left,
    Right,
}

/// LEFT | RIGHT (any case), else a syntax error.
fn parse_end(a: &[u8]) -> Result<End, CmdError> {
    if a.eq_ignore_ascii_case(b"left") {
        Ok(End::Left)
    } else if a.eq_ignore_ascii_case(b"right") {
        Ok(End::Right)
    } else {
        Err(CmdError::syntax())
    }
}

/// The data CF member of the element at index `i` (0-based from the head).
fn at(meta: &Meta, i: u64) -> [u8; 8] {
    list_index(meta.head.wrapping_add(i))
}

/// A fresh, empty list.
fn new_list(storage: &Storage) -> Result<Meta, CmdError> {
    Ok(Meta::collection(Kind::List, storage.next_version()?, 0))
}

/// Adds `elem` at one end of the list `meta` describes.
fn push(
    storage: &Storage,
    batch: &mut Batch,
    db: u16,
    key: &[u8],
    meta: &mut Meta,
    end: End,
    elem: &[u8],
) {
    let coll = Coll::new(db, key, meta);
    let pos = match end {
        End::Left => {
            meta.head = meta.head.wrapping_sub(1);
            list_index(meta.head)
        }
        End::Right => at(meta, meta.len),
    };
    batch.put_member(storage, Cf::Data, &coll, &pos, elem);
    meta.len += 1;
}

/// Pops up to `n` elements from one end of the list `meta` describes and commits it (deleted
/// once empty), with its keyspace event: LPOP/RPOP and the MPOP family (the caller holds the
/// key's lock).
fn pop_committed(
    ctx: &Ctx<'_>,
    key: &[u8],
    (meta, head): (&mut Meta, bool),
    end: End,
    n: u64,
) -> Result<Vec<Vec<u8>>, CmdError> {
    let (storage, db) = (ctx.storage(), ctx.db());
    let mut batch = Batch::default();
    let popped = pop(storage, &ctx.latest(), &mut batch, db, key, meta, end, n)?;
    let edits = head.then(|| {
        vec![match end {
            End::Left => ListEdit::PopFront(popped.len() as u64),
            End::Right => ListEdit::PopBack(popped.len() as u64),
        }]
    });
    put_edited(storage, &mut batch, db, key, meta, edits);
    ctx.commit(batch)?;
    notify_write(ctx, Class::List, end_event(end, false), key, meta.len == 0);
    Ok(popped)
}

/// Removes up to `n` elements from one end (the caller holds the key's lock), in pop order,
/// reading through the caller's `view` (its latest state; on an I/O thread, memory only).
#[allow(clippy::too_many_arguments)]
fn pop(
    storage: &Storage,
    view: &View<'_>,
    batch: &mut Batch,
    db: u16,
    key: &[u8],
    meta: &mut Meta,
    end: End,
    n: u64,
) -> Result<Vec<Vec<u8>>, CmdError> {
    let n = n.min(meta.len);
    let coll = Coll::new(db, key, meta);
    let mut out = Vec::with_capacity(n.min(1024) as usize);
    if n == 1 {
        let i = if end == End::Left { 0 } else { meta.len - 1 };
        let pos = at(meta, i);
        let v = view
            .get_member(&coll, &pos)?
            .ok_or_else(|| CmdError::err("list element missing"))?;
        batch.delete_member(storage, Cf::Data, &coll, &pos);
        out.push(v);
    } else if n > 1 {
        let mut c = view.members(Cf::Data, &coll);
        match end {
            End::Left => c.seek(&at(meta, 0)),
            End::Right => c.seek_back(&at(meta, meta.len - 1)),
        }
        while (out.len() as u64) < n {
            let Some((m, v)) = c.entry() else { break };
            batch.delete_member(storage, Cf::Data, &coll, m);
            out.push(v.to_vec());
            match end {
                End::Left => c.next(),
                End::Right => c.prev(),
            }
        }
        c.status()?;
        if (out.len() as u64) < n {
            return Err(CmdError::err("list elements missing"));
        }
    }
    if end == End::Left {
        meta.head = meta.head.wrapping_add(n);
    }
    meta.len -= n;
    Ok(out)
}

/// The last step of every list write: the meta record, or its deletion when the list is empty.
/// (A cached head of the list is dropped by it; see [`put_edited`].)
fn put_or_delete(storage: &Storage, batch: &mut Batch, db: u16, key: &[u8], meta: &Meta) {
    put_edited(storage, batch, db, key, meta, None);
}

/// [`put_or_delete`] of a list the write changed at its ends by `edits` (`None`: the cache
/// holds no head of it, see `Ctx::write_list`): the commit edits the list's cached head
/// instead of dropping it, so the next read of the head stays on the I/O thread.
fn put_edited(
    storage: &Storage,
    batch: &mut Batch,
    db: u16,
    key: &[u8],
    meta: &Meta,
    edits: Option<Vec<ListEdit>>,
) {
    if meta.len == 0 {
        batch.delete_meta(storage, db, key);
    } else {
        batch.put_meta_with_update(storage, db, key, meta, edits.map(CollUpdate::List));
    }
}

/// Redis's event name for a push or a pop at `end`.
fn end_event(end: End, push: bool) -> &'static str {
    match (end, push) {
        (End::Left, true) => "lpush",
        (End::Right, true) => "rpush",
        (End::Left, false) => "lpop",
        (End::Right, false) => "rpop",
    }
}

fn parse_int(a: &[u8]) -> Result<i64, CmdError> {
    parse_i64(a).ok_or(CmdError::not_integer())
}

// ---- push / pop --------------------------------------------------------------------------------

fn lpush(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    push_generic(ctx, args, End::Left, false)
}
fn rpush(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    push_generic(ctx, args, End::Right, false)
}
fn lpushx(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    push_generic(ctx, args, End::Left, true)
}
fn rpushx(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    push_generic(ctx, args, End::Right, true)
}

/// LPUSH / RPUSH / LPUSHX / RPUSHX, run to completion on an I/O thread too: through the `Ctx`
/// lock, version and commit, which there only try (and end the command with WouldBlock when a
/// client is blocked on the key, so waking it stays a worker's job).
fn push_generic(ctx: &mut Ctx<'_>, args: &Args, end: End, only_existing: bool) -> CmdResult {
    let key = &args[1];
    let storage = ctx.storage();
    let db = ctx.db();
    let _g = ctx.lock_keys(&[key])?;
    let (mut meta, head) = match ctx.write_list(key)? {
        Some(found) => found,
        None if only_existing => {
            ctx.out.int(0);
            return Ok(());
        }
        None => (Meta::collection(Kind::List, ctx.next_version()?, 0), false),
    };
    let mut batch = Batch::default();
    let mut edits = head.then(Vec::new);
    for elem in &args[2..] {
        push(storage, &mut batch, db, key, &mut meta, end, elem);
        if let Some(edits) = &mut edits {
            // A copy: the argument shares the connection's whole read buffer.
            let elem = Bytes::copy_from_slice(elem);
            edits.push(match end {
                End::Left => ListEdit::PushFront(elem),
                End::Right => ListEdit::PushBack(elem),
            });
        }
    }
    put_edited(storage, &mut batch, db, key, &meta, edits);
    ctx.commit(batch)?;
    ctx.notify(Class::List, end_event(end, true), key);
    ctx.out.int(meta.len as i64);
    Ok(())
}

fn lpop(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    pop_generic(ctx, args, End::Left)
}
fn rpop(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    pop_generic(ctx, args, End::Right)
}

/// LPOP / RPOP key [count], run to completion on an I/O thread too (through the `Ctx` lock,
/// view and commit, as the pushes).
fn pop_generic(ctx: &mut Ctx<'_>, args: &Args, end: End) -> CmdResult {
    if args.len() > 3 {
        return Err(CmdError::wrong_args(if end == End::Left {
            "lpop"
        } else {
            "rpop"
        }));
    }
    let count = match args.get(2) {
        None => None,
        Some(a) => Some(
            parse_i64(a)
                .filter(|n| *n >= 0)
                .ok_or(CmdError::fixed("value is out of range, must be positive"))?
                as u64,
        ),
    };
    let key = &args[1];
    let _g = ctx.lock_keys(&[key])?;
    let Some((mut meta, head)) = ctx.write_list(key)? else {
        match count {
            Some(_) => ctx.out.null_array(),
            None => ctx.out.null(),
        }
        return Ok(());
    };
    if count == Some(0) {
        ctx.out.array(0);
        return Ok(());
    }
    let popped = pop_committed(ctx, key, (&mut meta, head), end, count.unwrap_or(1))?;
    match count {
        None => ctx.out.bulk(&popped[0]),
        Some(_) => {
            ctx.out.array(popped.len());
            for v in &popped {
                ctx.out.bulk(v);
            }
        }
    }
    Ok(())
}

// ---- reads -------------------------------------------------------------------------------------

/// LLEN key: the meta record alone answers (a list the hot cache holds: on the I/O thread).
fn llen<'a, C: KeyReads<'a>>(ctx: &mut C, args: &Args) -> Result<(), C::Error> {
    let len = match ctx.read_list(&args[1], |_| None)? {
        ListRead::Missing => 0,
        ListRead::Cached(l) => l.len,
        ListRead::Stored(_, meta) => meta.len,
    };
    ctx.out().int(len as i64);
    Ok(())
}

/// The index `index` names in a list of `len` elements (negative: from the tail), if any.
fn list_position(index: i64, len: u64) -> Option<u64> {
    let i = if index < 0 {
        (len as i64).saturating_add(index)
    } else {
        index
    };
    (i >= 0 && (i as u64) < len).then_some(i as u64)
}

/// LINDEX key index. As in Redis, the key is looked up (and type-checked) before the index is
/// parsed: a missing key answers null whatever the index.
fn lindex<'a, C: KeyReads<'a>>(ctx: &mut C, args: &Args) -> Result<(), C::Error> {
    let key = &args[1];
    let index = parse_int(&args[2]);
    let want = |len| {
        let i = list_position(*index.as_ref().ok()?, len)?;
        Some((i, i))
    };
    let read = ctx.read_list(key, want)?;
    if matches!(read, ListRead::Missing) {
        ctx.out().null();
        return Ok(());
    }
    let index = index?;
    match read {
        ListRead::Missing => unreachable!("answered above"),
        ListRead::Cached(l) => {
            let v = list_position(index, l.len).and_then(|i| l.get(i));
            ctx.out().bulk_or_null(v);
        }
        ListRead::Stored(view, meta) => {
            let v = match list_position(index, meta.len) {
                Some(i) => view.get_member(&Coll::new(ctx.db(), key, &meta), &at(&meta, i))?,
                None => None,
            };
            ctx.out().bulk_or_null(v.as_deref());
        }
    }
    Ok(())
}

/// LRANGE key start stop: a list's head the hot cache holds answers from memory (on the I/O
/// thread), any other range is a seek and a cursor walk.
fn lrange<'a, C: KeyReads<'a>>(ctx: &mut C, args: &Args) -> Result<(), C::Error> {
    let start = parse_int(&args[2])?;
    let end = parse_int(&args[3])?;
    let key = &args[1];
    let range = |len| index_range(start, end, len);
    match ctx.read_list(key, range)? {
        ListRead::Missing => ctx.out().array(0),
        // Found cached only if the copy holds the range.
        ListRead::Cached(l) => match range(l.len).and_then(|(s, e)| l.range(s, e)) {
            Some(elements) => {
                let out = ctx.out();
                out.array(elements.len());
                elements.for_each(|v| out.bulk(v));
            }
            None => ctx.out().array(0),
        },
        ListRead::Stored(view, meta) => {
            let Some((start, end)) = range(meta.len) else {
                ctx.out().array(0);
                return Ok(());
            };
            let n = end - start + 1;
            let mut c = view.members(Cf::Data, &Coll::new(ctx.db(), key, &meta));
            c.seek(&at(&meta, start));
            let out = ctx.out();
            out.array(n as usize);
            for _ in 0..n {
                let Some((_, v)) = c.entry() else {
                    c.status()?;
                    return Err(CmdError::err("list elements missing").into());
                };
                out.bulk(v);
                c.next();
            }
        }
    }
    Ok(())
}

/// LPOS key element [RANK rank] [COUNT num-matches] [MAXLEN len].
fn lpos(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let mut rank: i64 = 1;
    let mut count: Option<i64> = None;
    let mut maxlen: i64 = 0;
    let mut i = 3;
    while i < args.len() {
        let opt = &args[i];
        let Some(val) = args.get(i + 1) else {
            return Err(CmdError::syntax());
        };
        if opt.eq_ignore_ascii_case(b"rank") {
            rank = parse_int(val)?;
            if rank == 0 {
                return Err(CmdError::err(
                    "RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list",
                ));
            }
        } else if opt.eq_ignore_ascii_case(b"count") {
            let c = parse_int(val)?;
            if c < 0 {
                return Err(CmdError::err("COUNT can't be negative"));
            }
            count = Some(c);
        } else if opt.eq_ignore_ascii_case(b"maxlen") {
            maxlen = parse_int(val)?;
            if maxlen < 0 {
                return Err(CmdError::err("MAXLEN can't be negative"));
            }
        } else {
            return Err(CmdError::syntax());
        }
        i += 2;
    }
    let key = &args[1];
    let elem = &args[2];
    let Some((view, meta)) = ctx.read_collection(key, Kind::List)? else {
        match count {
            Some(_) => ctx.out.array(0),
            None => ctx.out.null(),
        }
        return Ok(());
    };
    let from_tail = rank < 0;
    // Matches to skip before the first reported one (Redis negates LLONG_MIN into itself,
    // which reports from the first match).
    let skip = if rank == i64::MIN {
        0
    } else {
        rank.unsigned_abs() - 1
    };
    let want = match count {
        None => 1,
        Some(0) => u64::MAX,
        Some(c) => c as u64,
    };
    let coll = Coll::new(ctx.db(), key, &meta);
    let mut c = view.members(Cf::Data, &coll);
    if from_tail {
        c.seek_back(&at(&meta, meta.len - 1));
    } else {
        c.seek(&at(&meta, 0));
    }
    let mut found: Vec<i64> = Vec::new();
    let mut matches: u64 = 0;
    let mut index: u64 = 0;
    while let Some((_, v)) = c.entry() {
        if maxlen != 0 && index >= maxlen as u64 {
            break;
        }
        if v == &elem[..] {
            matches += 1;
            if matches > skip {
                let pos = if from_tail {
                    meta.len - 1 - index
                } else {
                    index
                };
                found.push(pos as i64);
                if found.len() as u64 >= want {
                    break;
                }
            }
        }
        index += 1;
        if from_tail {
            c.prev();
        } else {
            c.next();
        }
    }
    c.status()?;
    match count {
        Some(_) => {
            ctx.out.array(found.len());
            for p in found {
                ctx.out.int(p);
            }
        }
        None => match found.first() {
            Some(p) => ctx.out.int(*p),
            None => ctx.out.null(),
        },
    }
    Ok(())
}

// ---- in-place writes ---------------------------------------------------------------------------

/// LSET key index element. The key is looked up before the index is parsed, as in Redis.
fn lset(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let key = &args[1];
    let storage = ctx.storage();
    let db = ctx.db();
    let _g = storage.lock(db, &[key]);
    let Some(meta) = ctx.write_collection(key, Kind::List)? else {
        return Err(CmdError::no_such_key());
    };
    let index = parse_int(&args[2])?;
    let i = if index < 0 {
        meta.len as i64 + index
    } else {
        index
    };
    if i < 0 || i as u64 >= meta.len {
        return Err(CmdError::err("index out of range"));
    }
    let mut batch = Batch::default();
    let coll = Coll::new(db, key, &meta);
    batch.put_member(storage, Cf::Data, &coll, &at(&meta, i as u64), &args[3]);
    batch.put_meta(storage, db, key, &meta);
    storage.commit(batch)?;
    ctx.notify(Class::List, "lset", key);
    ctx.out.ok();
    Ok(())
}

/// LINSERT key BEFORE|AFTER pivot element.
fn linsert(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let after = if args[2].eq_ignore_ascii_case(b"after") {
        true
    } else if args[2].eq_ignore_ascii_case(b"before") {
        false
    } else {
        return Err(CmdError::syntax());
    };
    let (key, pivot, elem) = (&args[1], &args[3], &args[4]);
    let storage = ctx.storage();
    let db = ctx.db();
    let _g = storage.lock(db, &[key]);
    let Some(mut meta) = ctx.write_collection(key, Kind::List)? else {
        ctx.out.int(0);
        return Ok(());
    };
    let coll = Coll::new(db, key, &meta);
    let view = storage.latest();
    // Walk from the head to the pivot, keeping what we pass (it moves if the left side is
    // the shorter one).
    let mut before: Vec<Vec<u8>> = Vec::new();
    let mut found = None;
    {
        let mut c = view.members(Cf::Data, &coll);
        c.seek(&at(&meta, 0));
        let mut i = 0u64;
        while let Some((_, v)) = c.entry() {
            if i >= meta.len {
                break;
            }
            let hit = v == &pivot[..];
            if hit && !after {
                found = Some(i);
                break;
            }
            // Past the middle the right side is the shorter one: stop keeping elements.
            if i < meta.len / 2 {
                before.push(v.to_vec());
            } else {
                before = Vec::new();
            }
            if hit {
                found = Some(i + 1);
                break;
            }
            i += 1;
            c.next();
        }
        c.status()?;
    }
    let Some(p) = found else {
        ctx.out.int(-1);
        return Ok(());
    };
    // `p`: the index the new element takes.
    let mut batch = Batch::default();
    if p <= meta.len / 2 {
        debug_assert_eq!(before.len() as u64, p);
        // Shift elements [0, p) one position left.
        let new_head = meta.head.wrapping_sub(1);
        for (j, v) in before.iter().enumerate() {
            batch.put_member(
                storage,
                Cf::Data,
                &coll,
                &list_index(new_head.wrapping_add(j as u64)),
                v,
            );
        }
        batch.put_member(
            storage,
            Cf::Data,
            &coll,
            &list_index(new_head.wrapping_add(p)),
            elem,
        );
        meta.head = new_head;
    } else {
        drop(before);
        // Shift elements [p, len) one position right, from the tail down.
        let mut c = view.members(Cf::Data, &coll);
        c.seek_back(&at(&meta, meta.len - 1));
        let mut j = meta.len;
        while j > p {
            let Some((_, v)) = c.entry() else {
                c.status()?;
                return Err(CmdError::err("list elements missing"));
            };
            batch.put_member(storage, Cf::Data, &coll, &at(&meta, j), v);
            j -= 1;
            c.prev();
        }
        batch.put_member(storage, Cf::Data, &coll, &at(&meta, p), elem);
    }
    meta.len += 1;
    batch.put_meta(storage, db, key, &meta);
    storage.commit(batch)?;
    ctx.notify(Class::List, "linsert", key);
    ctx.out.int(meta.len as i64);
    Ok(())
}

/// LREM key count element.
fn lrem(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let count = parse_int(&args[2])?;
    let (key, elem) = (&args[1], &args[3]);
    let storage = ctx.storage();
    let db = ctx.db();
    let _g = storage.lock(db, &[key]);
    let Some(mut meta) = ctx.write_collection(key, Kind::List)? else {
        ctx.out.int(0);
        return Ok(());
    };
    let from_tail = count < 0;
    let limit = if count == 0 {
        u64::MAX
    } else {
        count.unsigned_abs()
    };
    let coll = Coll::new(db, key, &meta);
    let view = storage.latest();
    let mut batch = Batch::default();
    let mut c = view.members(Cf::Data, &coll);
    if from_tail {
        c.seek_back(&at(&meta, meta.len - 1));
    } else {
        c.seek(&at(&meta, 0));
    }
    // Walk from the chosen end: `r` counts elements read, survivors are written back `removed`
    // positions closer to that end.
    let mut removed = 0u64;
    let mut r = 0u64;
    while r < meta.len {
        let Some((_, v)) = c.entry() else { break };
        if removed < limit && v == &elem[..] {
            removed += 1;
        } else if removed > 0 {
            let w = r - removed;
            let pos = if from_tail {
                at(&meta, meta.len - 1 - w)
            } else {
                at(&meta, w)
            };
            batch.put_member(storage, Cf::Data, &coll, &pos, v);
        }
        r += 1;
        if from_tail {
            c.prev();
        } else {
            c.next();
        }
    }
    c.status()?;
    if removed > 0 {
        // The `removed` positions at the far end are now unused.
        for k in 0..removed {
            let pos = if from_tail {
                at(&meta, k)
            } else {
                at(&meta, meta.len - 1 - k)
            };
            batch.delete_member(storage, Cf::Data, &coll, &pos);
        }
        if from_tail {
            meta.head = meta.head.wrapping_add(removed);
        }
        meta.len -= removed;
        let mut b = Batch::default();
        if meta.len == 0 {
            // Nothing survives: deleting the meta record is enough.
            b.delete_meta(storage, db, key);
        } else {
            b = batch;
            b.put_meta(storage, db, key, &meta);
        }
        storage.commit(b)?;
        notify_write(ctx, Class::List, "lrem", key, meta.len == 0);
    }
    ctx.out.int(removed as i64);
    Ok(())
}

/// LTRIM key start stop: deletes only the positions it drops.
fn ltrim(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let start = parse_int(&args[2])?;
    let end = parse_int(&args[3])?;
    let key = &args[1];
    let storage = ctx.storage();
    let db = ctx.db();
    let _g = storage.lock(db, &[key]);
    let Some((mut meta, head)) = ctx.write_list(key)? else {
        ctx.out.ok();
        return Ok(());
    };
    let (ltrim, rtrim) = match index_range(start, end, meta.len) {
        None => (meta.len, 0),
        Some((s, e)) => (s, meta.len - e - 1),
    };
    if ltrim == 0 && rtrim == 0 {
        ctx.out.ok();
        return Ok(());
    }
    let mut batch = Batch::default();
    let emptied = ltrim + rtrim >= meta.len;
    if emptied {
        batch.delete_meta(storage, db, key);
    } else {
        let coll = Coll::new(db, key, &meta);
        for i in 0..ltrim {
            batch.delete_member(storage, Cf::Data, &coll, &at(&meta, i));
        }
        for i in meta.len - rtrim..meta.len {
            batch.delete_member(storage, Cf::Data, &coll, &at(&meta, i));
        }
        let trim = ListEdit::Trim(ltrim, meta.len - rtrim - 1);
        let edits = head.then(|| vec![trim]);
        meta.head = meta.head.wrapping_add(ltrim);
        meta.len -= ltrim + rtrim;
        put_edited(storage, &mut batch, db, key, &meta, edits);
    }
    storage.commit(batch)?;
    notify_write(ctx, Class::List, "ltrim", key, emptied);
    ctx.out.ok();
    Ok(())
}

// ---- moves -------------------------------------------------------------------------------------

fn lmove(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let from = parse_end(&args[3])?;
    let to = parse_end(&args[4])?;
    move_generic(ctx, args, from, to, None)
}

fn rpoplpush(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    move_generic(ctx, args, End::Right, End::Left, None)
}

fn blmove(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let from = parse_end(&args[3])?;
    let to = parse_end(&args[4])?;
    let deadline = parse_timeout(&args[5])?;
    move_generic(ctx, args, from, to, Some(deadline))
}

fn brpoplpush(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let deadline = parse_timeout(&args[3])?;
    move_generic(ctx, args, End::Right, End::Left, Some(deadline))
}

/// LMOVE and friends: pop from `args[1]`'s `from` end, push to `args[2]`'s `to` end. With a
/// deadline, blocks when the source is empty.
fn move_generic(
    ctx: &mut Ctx<'_>,
    args: &Args,
    from: End,
    to: End,
    block: Option<u64>,
) -> CmdResult {
    let (src, dst) = (&args[1], &args[2]);
    let storage = ctx.storage();
    let db = ctx.db();
    let _g = storage.lock(db, &[src, dst]);
    let src_meta = match ctx.write_collection(src, Kind::List) {
        Err(e) if ctx.serving_waiter() => {
            let _ = e;
            None // Redis 7.0 keeps a waiter whose key changed type blocked
        }
        r => r?,
    };
    let Some(mut src_meta) = src_meta else {
        return match block {
            Some(deadline) => ctx.block_on(Kind::List, &[src], deadline, TimeoutReply::NullBulk),
            None => {
                ctx.out.null();
                Ok(())
            }
        };
    };
    let same = src == dst;
    let mut dst_meta = if same {
        None
    } else {
        Some(match ctx.write_collection(dst, Kind::List)? {
            Some(m) => m,
            None => new_list(storage)?,
        })
    };
    let mut batch = Batch::default();
    let v = pop(
        storage,
        &ctx.latest(),
        &mut batch,
        db,
        src,
        &mut src_meta,
        from,
        1,
    )?
    .pop()
    .ok_or_else(|| CmdError::err("list element missing"))?;
    match dst_meta.as_mut() {
        None => {
            push(storage, &mut batch, db, src, &mut src_meta, to, &v);
            put_or_delete(storage, &mut batch, db, src, &src_meta);
        }
        Some(dm) => {
            push(storage, &mut batch, db, dst, dm, to, &v);
            put_or_delete(storage, &mut batch, db, src, &src_meta);
            batch.put_meta(storage, db, dst, dm);
        }
    }
    storage.commit(batch)?;
    // Redis's order: the push on the destination, the pop on the source, its deletion.
    ctx.notify(Class::List, end_event(to, true), dst);
    notify_write(
        ctx,
        Class::List,
        end_event(from, false),
        src,
        src_meta.len == 0,
    );
    ctx.out.bulk(&v);
    Ok(())
}

// ---- multi-key pops ----------------------------------------------------------------------------

fn blpop(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    bpop_generic(ctx, args, End::Left)
}
fn brpop(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    bpop_generic(ctx, args, End::Right)
}

/// BLPOP / BRPOP key [key ...] timeout.
fn bpop_generic(ctx: &mut Ctx<'_>, args: &Args, end: End) -> CmdResult {
    let deadline = parse_timeout(&args[args.len() - 1])?;
    let keys = &args[1..args.len() - 1];
    let storage = ctx.storage();
    let _g = storage.lock(ctx.db(), keys);
    match mpop(ctx, keys, end, 1)? {
        Some((key, vals)) => {
            ctx.out.array(2);
            ctx.out.bulk(&key);
            ctx.out.bulk(&vals[0]);
            Ok(())
        }
        None => ctx.block_on(Kind::List, keys, deadline, TimeoutReply::NullArray),
    }
}

/// The key popped from and the elements popped.
type Popped = (bytes::Bytes, Vec<Vec<u8>>);

/// Pops up to `count` elements from the first non-empty list of `keys` (the caller holds all
/// their locks, and keeps them to block if nothing was there).
/// WRONGTYPE for a key of another type met before one with elements (skipped when serving a
/// waiter).
fn mpop(
    ctx: &mut Ctx<'_>,
    keys: &[bytes::Bytes],
    end: End,
    count: u64,
) -> Result<Option<Popped>, CmdError> {
    for key in keys {
        let found = match ctx.write_list(key) {
            Err(_) if ctx.serving_waiter() => continue,
            r => r?,
        };
        let Some((mut meta, head)) = found else {
            continue;
        };
        let vals = pop_committed(ctx, key, (&mut meta, head), end, count)?;
        return Ok(Some((key.clone(), vals)));
    }
    Ok(None)
}

/// Parses `numkeys key [key ...] LEFT|RIGHT [COUNT count]` starting at `args[at]`.
fn parse_mpop(args: &Args, at: usize) -> Result<(&[bytes::Bytes], End, u64), CmdError> {
    let numkeys = parse_i64(&args[at])
        .filter(|n| *n > 0)
        .ok_or(CmdError::err("numkeys should be greater than 0"))? as u64;
    let where_idx = (at as u64 + 1).saturating_add(numkeys);
    if where_idx >= args.len() as u64 {
        return Err(CmdError::syntax());
    }
    let where_idx = where_idx as usize;
    let end = parse_end(&args[where_idx])?;
    let mut count = None;
    let mut j = where_idx + 1;
    while j < args.len() {
        if count.is_none() && args[j].eq_ignore_ascii_case(b"count") && j + 1 < args.len() {
            j += 1;
            count = Some(
                parse_i64(&args[j])
                    .filter(|n| *n > 0)
                    .ok_or(CmdError::err("count should be greater than 0"))? as u64,
            );
        } else {
            return Err(CmdError::syntax());
        }
        j += 1;
    }
    Ok((&args[at + 1..where_idx], end, count.unwrap_or(1)))
}

fn mpop_reply(ctx: &mut Ctx<'_>, key: &[u8], vals: &[Vec<u8>]) {
    ctx.out.array(2);
    ctx.out.bulk(key);
    ctx.out.array(vals.len());
    for v in vals {
        ctx.out.bulk(v);
    }
}

/// LMPOP numkeys key [key ...] LEFT|RIGHT [COUNT count].
fn lmpop(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let (keys, end, count) = parse_mpop(args, 1)?;
    let storage = ctx.storage();
    let _g = storage.lock(ctx.db(), keys);
    match mpop(ctx, keys, end, count)? {
        Some((key, vals)) => mpop_reply(ctx, &key, &vals),
        None => ctx.out.null_array(),
    }
    Ok(())
}

/// BLMPOP timeout numkeys key [key ...] LEFT|RIGHT [COUNT count].
fn blmpop(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let deadline = parse_timeout(&args[1])?;
    let (keys, end, count) = parse_mpop(args, 2)?;
    let storage = ctx.storage();
    let _g = storage.lock(ctx.db(), keys);
    match mpop(ctx, keys, end, count)? {
        Some((key, vals)) => {
            mpop_reply(ctx, &key, &vals);
            Ok(())
        }
        None => ctx.block_on(Kind::List, keys, deadline, TimeoutReply::NullArray),
    }
}
