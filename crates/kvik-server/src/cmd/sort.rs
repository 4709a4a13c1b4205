//! SORT and SORT_RO: the elements of a list, set or sorted set, sorted by their own value or by
//! the value of other keys (`BY weight_*`, `BY hash_*->field`), with LIMIT, GET patterns (`#`
//! for the element itself), ASC/DESC, ALPHA, and (SORT only) STORE into a list.
//!
//! As Redis 7.0 (sort.c): a BY pattern without `*` means "do not sort" (lists and sorted sets
//! keep their order, reversed by DESC); numeric weights are parsed like strtod and a value that
//! is not a number fails the whole command; equal numeric weights order by the element's bytes;
//! a missing BY key weighs 0 (ALPHA: sorts first); STORE replaces the destination whatever its
//! type, stores "" for a missing GET value, deletes the destination for an empty result and
//! emits `sortstore`; BY nosort with STORE sorts a set ALPHA; in cluster mode a BY pattern with `*` and any GET are refused.
//!
//! Differences: ALPHA compares bytes (Redis's strcoll in the C locale); a set's unsorted order
//! (BY nosort without STORE) is byte order, where Redis's is its hash table's; elements with
//! equal ALPHA weights keep their order (Redis's quicksort leaves it unspecified).

use super::cached::KeyReads;
use super::ctx::{Args, CmdError, CmdResult, Ctx, HashRead};
use super::spec::{CacheEffect, Class, CommandSpec, Flags, KeySpec};
use crate::storage::encoding::{Kind, Meta};
use crate::storage::{Batch, Cf, Coll, View};
use std::cmp::Ordering;
use std::sync::atomic::Ordering::Relaxed;

const SUMMARY: &str =
    "Sorts the elements in a list, a set, or a sorted set, optionally storing the result.";
const COMPLEXITY: &str = "O(N+M*log(M)) where N is the number of elements in the list or set to \
                          sort, and M the number of returned elements. When the elements are not \
                          sorted, complexity is O(N).";

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::new(
        "sort",
        -2,
        Flags::WRITE.union(Flags::DENYOOM),
        KeySpec::ONE,
        sort,
    )
    .movable(sort_keys)
    .event(Class::List, "sortstore")
    .event(Class::Generic, "del")
    .cache(CacheEffect::Invalidate)
    .acl(&["write", "set", "sortedset", "list", "slow", "dangerous"])
    .group("generic")
    .doc(SUMMARY, "1.0.0", COMPLEXITY),
    CommandSpec::new("sort_ro", -2, Flags::READONLY, KeySpec::ONE, sort_ro)
        .acl(&["read", "set", "sortedset", "list", "slow", "dangerous"])
        .group("generic")
        .doc(
            "Returns the sorted elements of a list, a set, or a sorted set.",
            "7.0.0",
            COMPLEXITY,
        ),
];

const ERR_NOT_DOUBLE: CmdError =
    CmdError::fixed("One or more scores can't be converted into double");
const ERR_BY_CLUSTER: CmdError = CmdError::fixed("BY option of SORT denied in Cluster mode.");
const ERR_GET_CLUSTER: CmdError = CmdError::fixed("GET option of SORT denied in Cluster mode.");
const ERR_NOT_INTEGER: CmdError = CmdError::fixed("value is not an integer or out of range");

/// Keys of SORT: the sorted key, and the last STORE destination (as Redis's sortGetKeys, which
/// skips the arguments of LIMIT, BY and GET).
fn sort_keys(args: &Args) -> Vec<usize> {
    let mut keys = vec![1];
    let mut store = None;
    let mut j = 2;
    while j < args.len() {
        let a = &args[j];
        let skip = if a.eq_ignore_ascii_case(b"limit") {
            2
        } else if a.eq_ignore_ascii_case(b"get") || a.eq_ignore_ascii_case(b"by") {
            1
        } else if a.eq_ignore_ascii_case(b"store") {
            if j + 1 < args.len() {
                store = Some(j + 1);
            }
            1
        } else {
            0
        };
        j += 1 + skip;
    }
    keys.extend(store);
    keys
}

/// The parsed options.
struct Options<'a> {
    by: Option<&'a [u8]>,
    dont_sort: bool,
    /// LIMIT offset count (count < 0: to the end).
    limit: Option<(i64, i64)>,
    gets: Vec<&'a [u8]>,
    desc: bool,
    alpha: bool,
    store: Option<&'a [u8]>,
}

fn parse<'a>(ctx: &Ctx<'_>, args: &'a Args, read_only: bool) -> Result<Options<'a>, CmdError> {
    let cluster = ctx.server.config.cluster.enabled.load(Relaxed);
    let mut o = Options {
        by: None,
        dont_sort: false,
        limit: None,
        gets: Vec::new(),
        desc: false,
        alpha: false,
        store: None,
    };
    let mut j = 2;
    while j < args.len() {
        let a = &args[j];
        let left = args.len() - j - 1;
        if a.eq_ignore_ascii_case(b"asc") {
            o.desc = false;
        } else if a.eq_ignore_ascii_case(b"desc") {
            o.desc = true;
        } else if a.eq_ignore_ascii_case(b"alpha") {
            o.alpha = true;
        } else if a.eq_ignore_ascii_case(b"limit") && left >= 2 {
            let n = |b: &[u8]| kvik_resp::parse_i64(b).ok_or(ERR_NOT_INTEGER);
            o.limit = Some((n(&args[j + 1])?, n(&args[j + 2])?));
            j += 2;
        } else if a.eq_ignore_ascii_case(b"store") && left >= 1 && !read_only {
            o.store = Some(&args[j + 1]);
            j += 1;
        } else if a.eq_ignore_ascii_case(b"by") && left >= 1 {
            let pattern = &args[j + 1][..];
            if !pattern.contains(&b'*') {
                o.dont_sort = true;
            } else if cluster {
                return Err(ERR_BY_CLUSTER);
            }
            o.by = Some(pattern);
            j += 1;
        } else if a.eq_ignore_ascii_case(b"get") && left >= 1 {
            if cluster {
                return Err(ERR_GET_CLUSTER);
            }
            o.gets.push(&args[j + 1]);
            j += 1;
        } else {
            return Err(CmdError::syntax());
        }
        j += 1;
    }
    Ok(o)
}

fn sort(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    run(ctx, args, false)
}

fn sort_ro(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    run(ctx, args, true)
}

fn run(ctx: &mut Ctx<'_>, args: &Args, read_only: bool) -> CmdResult {
    let mut o = parse(ctx, args, read_only)?;
    let key = &args[1][..];
    let storage = ctx.storage();
    // STORE reads the source and replaces the destination under both keys' locks.
    let _guard = o.store.map(|dst| storage.lock(ctx.db(), &[key, dst]));
    let (mut elems, kind) = load(ctx, key, o.store.is_some())?;
    if o.dont_sort && kind == Some(Kind::Set) && o.store.is_some() {
        // As Redis: a stored result must not depend on a set's internal order, so it is
        // sorted as ALPHA by the elements themselves.
        o.dont_sort = false;
        o.alpha = true;
        o.by = None;
    }
    if !o.dont_sort {
        sort_elements(ctx, &mut elems, &o)?;
    } else if o.desc && kind != Some(Kind::Set) {
        // Unsorted lists and sorted sets keep their order, read from the tail for DESC.
        elems.reverse();
    }
    let (start, end) = window(o.limit, elems.len());
    let chosen = if start < end {
        &elems[start..end]
    } else {
        &[][..]
    };
    match o.store {
        None => reply(ctx, chosen, &o.gets),
        Some(dst) => store(ctx, dst, chosen, &o.gets),
    }
}

/// The elements to sort, in the key's order (a list's, a sorted set's by score, a set's by
/// bytes), and the key's type; none for a missing key, WRONGTYPE for another type. A writer
/// (`locked`) reads the latest state, a reader one snapshot.
fn load(ctx: &Ctx<'_>, key: &[u8], locked: bool) -> Result<(Vec<Vec<u8>>, Option<Kind>), CmdError> {
    let Some(found) = ctx.lookup_read(key)? else {
        return Ok((Vec::new(), None));
    };
    if !matches!(found.kind, Kind::List | Kind::Set | Kind::ZSet) {
        return Err(CmdError::wrong_type());
    }
    // Members come from one view, with the meta record read from it so the two agree.
    let storage = ctx.storage();
    let view: View<'_> = if locked {
        storage.latest()
    } else {
        storage.view()
    };
    let Some(meta): Option<Meta> = view.get_live(ctx.db(), key, ctx.now_ms)? else {
        return Ok((Vec::new(), None));
    };
    let coll = Coll::new(ctx.db(), key, &meta);
    let cf = if meta.kind == Kind::ZSet {
        Cf::Score
    } else {
        Cf::Data
    };
    let mut out = Vec::with_capacity(meta.len.min(1 << 16) as usize);
    view.for_each_member(cf, &coll, |m, v| {
        out.push(match meta.kind {
            // The score index: the encoded score (8 bytes), then the member.
            Kind::ZSet => m.get(8..).unwrap_or_default().to_vec(),
            Kind::List => v.to_vec(),
            _ => m.to_vec(),
        });
        true
    })?;
    Ok((out, Some(meta.kind)))
}

/// What an element is sorted by.
enum Weight {
    Number(f64),
    /// ALPHA with BY: the other key's value (`None` when missing).
    Text(Option<Vec<u8>>),
    /// ALPHA without BY: the element itself.
    Itself,
}

fn sort_elements(ctx: &Ctx<'_>, elems: &mut Vec<Vec<u8>>, o: &Options<'_>) -> CmdResult {
    let mut weighted = Vec::with_capacity(elems.len());
    let mut not_double = false;
    for e in elems.drain(..) {
        let by = match o.by {
            Some(pattern) => lookup_pattern(ctx, pattern, &e)?,
            None => None,
        };
        let w = if o.alpha {
            match o.by {
                Some(_) => Weight::Text(by),
                None => Weight::Itself,
            }
        } else {
            let source = match o.by {
                Some(_) => by.as_deref(),
                None => Some(&e[..]),
            };
            match source.map(parse_double) {
                None => Weight::Number(0.0),
                Some(Some(n)) => Weight::Number(n),
                Some(None) => {
                    not_double = true;
                    Weight::Number(0.0)
                }
            }
        };
        weighted.push((w, e));
    }
    if not_double {
        return Err(ERR_NOT_DOUBLE);
    }
    weighted.sort_by(|(wa, a), (wb, b)| {
        let ord = match (wa, wb) {
            (Weight::Number(x), Weight::Number(y)) => x
                .partial_cmp(y)
                .unwrap_or(Ordering::Equal)
                .then_with(|| a.cmp(b)),
            (Weight::Text(x), Weight::Text(y)) => x.cmp(y),
            _ => a.cmp(b),
        };
        if o.desc {
            ord.reverse()
        } else {
            ord
        }
    });
    elems.extend(weighted.into_iter().map(|(_, e)| e));
    Ok(())
}

/// A number as strtod reads it for Redis: leading white space allowed, nothing after it, no NaN
/// and no overflow; the empty string is 0; hexadecimal integers are accepted. Redis hands
/// strtod the value as a C string, so a NUL byte ends it (a bitmap's "\0\0\0" weighs 0).
fn parse_double(b: &[u8]) -> Option<f64> {
    let b = &b[..b.iter().position(|&c| c == 0).unwrap_or(b.len())];
    let s = std::str::from_utf8(b).ok()?;
    if s.is_empty() {
        return Some(0.0);
    }
    let t = s.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    let (neg, digits) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    if let Some(hex) = digits
        .strip_prefix("0x")
        .or_else(|| digits.strip_prefix("0X"))
    {
        let n = u64::from_str_radix(hex, 16).ok()? as f64;
        return Some(if neg { -n } else { n });
    }
    let n: f64 = t.parse().ok()?;
    let literal_inf = digits.to_ascii_lowercase().starts_with("inf");
    if n.is_nan() || (n.is_infinite() && !literal_inf) {
        return None;
    }
    Some(n)
}

/// Redis's lookupKeyByPattern: `#` is the element itself; otherwise the first `*` of the
/// pattern is replaced by the element, and a `->field` after it (non-empty) reads that field of
/// a hash; a key of another type, or a missing key or field, is `None`.
fn lookup_pattern(ctx: &Ctx<'_>, pattern: &[u8], elem: &[u8]) -> Result<Option<Vec<u8>>, CmdError> {
    if pattern == b"#" {
        return Ok(Some(elem.to_vec()));
    }
    let Some(star) = pattern.iter().position(|&c| c == b'*') else {
        return Ok(None);
    };
    let arrow = pattern[star + 1..]
        .windows(2)
        .position(|w| w == b"->")
        .map(|i| star + 1 + i)
        .filter(|&i| i + 2 < pattern.len());
    let key_end = arrow.unwrap_or(pattern.len());
    let mut name = Vec::with_capacity(key_end + elem.len());
    name.extend_from_slice(&pattern[..star]);
    name.extend_from_slice(elem);
    name.extend_from_slice(&pattern[star + 1..key_end]);
    let Some(field) = arrow.map(|i| &pattern[i + 2..]) else {
        // A segmented bitmap is a string to users (see `cmd::bitmap`).
        return Ok(match ctx.lookup_read(&name)? {
            Some(m) if m.kind == Kind::String => Some(m.value),
            Some(m) if m.kind == Kind::Bitmap => Some(ctx.bitmap_string(&name, &m)?),
            _ => None,
        });
    };
    match ctx.lookup_read(&name)? {
        Some(m) if m.kind == Kind::Hash => {}
        _ => return Ok(None),
    }
    Ok(match ctx.read_hash(&name)? {
        HashRead::Missing => None,
        HashRead::Cached(fields) => fields.get(field).map(<[u8]>::to_vec),
        HashRead::Big(big) => ctx
            .big_fields(&name, &big, &[field])?
            .pop()
            .flatten()
            .map(|v| v.to_vec()),
        HashRead::Stored(view, meta) => {
            view.get_member(&Coll::new(ctx.db(), &name, &meta), field)?
        }
    })
}

/// The `start..end` window LIMIT selects from `len` elements, clamped as Redis does (a
/// negative offset is 0, a negative count means to the end).
fn window(limit: Option<(i64, i64)>, len: usize) -> (usize, usize) {
    let Some((offset, count)) = limit else {
        return (0, len);
    };
    let start = offset.max(0) as u64;
    let start = start.min(len as u64) as usize;
    let end = if count < 0 {
        len
    } else {
        (start as u64).saturating_add(count as u64).min(len as u64) as usize
    };
    (start, end.max(start))
}

fn reply(ctx: &mut Ctx<'_>, chosen: &[Vec<u8>], gets: &[&[u8]]) -> CmdResult {
    if gets.is_empty() {
        ctx.out.array(chosen.len());
        for e in chosen {
            ctx.out.bulk(e);
        }
        return Ok(());
    }
    let mut values = Vec::with_capacity(chosen.len() * gets.len());
    for e in chosen {
        for g in gets {
            values.push(lookup_pattern(ctx, g, e)?);
        }
    }
    ctx.out.array(values.len());
    for v in &values {
        match v {
            Some(v) => ctx.out.bulk(v),
            None => ctx.out.null(),
        }
    }
    Ok(())
}

/// STORE: the result as a new list under a fresh version (the old destination, of any type, is
/// dropped in O(1)), or no destination at all when the result is empty. Replies its length.
fn store(ctx: &mut Ctx<'_>, dst: &[u8], chosen: &[Vec<u8>], gets: &[&[u8]]) -> CmdResult {
    let mut values = Vec::with_capacity(chosen.len() * gets.len().max(1));
    for e in chosen {
        if gets.is_empty() {
            values.push(e.clone());
        }
        for g in gets {
            values.push(lookup_pattern(ctx, g, e)?.unwrap_or_default());
        }
    }
    let storage = ctx.storage();
    let db = ctx.db();
    let mut batch = Batch::default();
    if values.is_empty() {
        if ctx.lookup_write(dst)?.is_some() {
            batch.delete_meta(storage, db, dst);
            storage.commit(batch)?;
            ctx.notify(Class::Generic, "del", dst);
        }
    } else {
        let mut meta = Meta::collection(Kind::List, storage.next_version()?, 0);
        let coll = Coll::new(db, dst, &meta);
        for (i, v) in values.iter().enumerate() {
            let pos = crate::storage::encoding::list_index(meta.head.wrapping_add(i as u64));
            batch.put_member(storage, Cf::Data, &coll, &pos, v);
        }
        meta.len = values.len() as u64;
        batch.put_meta(storage, db, dst, &meta);
        storage.commit(batch)?;
        ctx.notify(Class::List, "sortstore", dst);
    }
    ctx.out.int(values.len() as i64);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_parse_as_strtod() {
        assert_eq!(parse_double(b"\0\0\0"), Some(0.0));
        assert_eq!(parse_double(b"12\0abc"), Some(12.0));
        assert_eq!(parse_double(b""), Some(0.0));
        assert_eq!(parse_double(b" 1.5"), Some(1.5));
        assert_eq!(parse_double(b"0x10"), Some(16.0));
        assert_eq!(parse_double(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_double(b"1e400"), None);
        assert_eq!(parse_double(b"nan"), None);
        assert_eq!(parse_double(b"1 "), None);
        assert_eq!(parse_double(b"abc"), None);
    }

    #[test]
    fn limit_clamps_like_redis() {
        assert_eq!(window(None, 5), (0, 5));
        assert_eq!(window(Some((1, 2)), 5), (1, 3));
        assert_eq!(window(Some((-3, 2)), 5), (0, 2));
        assert_eq!(window(Some((2, -1)), 5), (2, 5));
        assert_eq!(window(Some((9, 2)), 5), (5, 5));
        assert_eq!(window(Some((0, 0)), 5), (0, 0));
    }

    #[test]
    fn store_destination_is_a_key() {
        let args: Vec<bytes::Bytes> = ["sort", "k", "limit", "0", "1", "store", "d", "get", "#"]
            .iter()
            .map(|s| bytes::Bytes::from(s.to_string()))
            .collect();
        assert_eq!(sort_keys(&args), vec![1, 6]);
    }
}
