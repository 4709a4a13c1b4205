//! HyperLogLog commands: PFADD PFCOUNT PFMERGE PFDEBUG PFSELFTEST (Redis's `hyperloglog` group).
//!
//! An HLL is a Redis string (kind `string`, the value inline in the meta record) whose bytes are
//! Redis's own HLL encoding, computed by `kvik_types::hll`; GET, SET, DUMP and RESTORE therefore
//! work on it unchanged. Every command here is the same shape: take the key's lock, read the
//! string (generic WRONGTYPE for another kind, HLL's WRONGTYPE for a string that is not an HLL),
//! hand the bytes to the algorithm, store what comes back with the key's expiry kept.
//!
//! PFCOUNT of one key caches the cardinality in the value's header, as Redis does: when the
//! cache was stale it writes the value back (so it takes the lock, counts as a change for
//! WATCH, and updates the hot cache like any string write), though Redis flags it read-only.

use super::bitmap::segments;
use super::ctx::{Args, CmdError, CmdResult, Ctx};
use super::spec::{CacheEffect, Class, CommandSpec, Flags, KeySpec};
use crate::storage::encoding::{Kind, Meta};
use crate::storage::Batch;
use kvik_types::bits::BitRead;
use kvik_types::hll;

/// Redis's default `hll-sparse-max-bytes` (kvik has no such setting yet).
const SPARSE_MAX_BYTES: usize = hll::DEFAULT_SPARSE_MAX_BYTES;

const WRITE_OOM: Flags = Flags::WRITE.union(Flags::DENYOOM);
const WRITE_OOM_FAST: Flags = WRITE_OOM.union(Flags::FAST);
const DEBUG_FLAGS: Flags = WRITE_OOM.union(Flags::ADMIN);
/// Redis flags PFCOUNT read-only but `may_replicate` (it may write the cached cardinality), so
/// read-only scripts may not call it.
const PFCOUNT_FLAGS: Flags = Flags::READONLY.union(Flags::MAY_REPLICATE);

/// PFDEBUG's key is its second argument.
const SECOND: KeySpec = KeySpec {
    first: 2,
    last: 2,
    step: 1,
};

/// Declares one HyperLogLog command (group "hyperloglog").
const fn pf(
    name: &'static str,
    arity: i32,
    flags: Flags,
    keys: KeySpec,
    handler: super::spec::Handler,
    acl: &'static [&'static str],
) -> CommandSpec {
    CommandSpec::new(name, arity, flags, keys, handler)
        .acl(acl)
        .group("hyperloglog")
        .cache(CacheEffect::Update)
}

pub static COMMANDS: &[CommandSpec] = &[
    pf("pfadd", -2, WRITE_OOM_FAST, KeySpec::ONE, pfadd, &["write", "hyperloglog", "fast"])
        .rtc_write()
        .event(Class::String, "pfadd")
        .doc(
        "Adds elements to a HyperLogLog key. Creates the key if it doesn't exist.",
        "2.8.9",
        "O(1) to add every element.",
    ),
    // Read-only in Redis's table, but a stale cached cardinality is written back (see above).
    pf("pfcount", -2, PFCOUNT_FLAGS, KeySpec::ALL, pfcount, &["read", "hyperloglog", "slow"])
        .rtc_write()
        .doc(
        "Returns the approximated cardinality of the set(s) observed by the HyperLogLog key(s).",
        "2.8.9",
        "O(1) with a very small average constant time when called with a single key. O(N) with N being the number of keys, and much bigger constant times, when called with multiple keys.",
    ),
    pf("pfmerge", -2, WRITE_OOM, KeySpec::ALL, pfmerge, &["write", "hyperloglog", "slow"])
        .event(Class::String, "pfadd")
        .doc(
        "Merges one or more HyperLogLog values into a single key.",
        "2.8.9",
        "O(N) to merge N HyperLogLogs, but with high constant times.",
    ),
    pf(
        "pfdebug",
        3,
        DEBUG_FLAGS,
        SECOND,
        pfdebug,
        &["write", "hyperloglog", "admin", "slow", "dangerous"],
    )
    .no_events()
    .doc("Internal commands for debugging HyperLogLog values.", "2.8.9", "N/A"),
    CommandSpec::new("pfselftest", 1, Flags::ADMIN, KeySpec::NONE, pfselftest)
        .acl(&["hyperloglog", "admin", "slow", "dangerous"])
        .group("hyperloglog")
        .doc(
            "An internal command for testing HyperLogLog values.",
            "2.8.9",
            "N/A",
        ),
];

/// A key's bytes as an HLL, in Redis's check order: absent is `None`, another kind is the
/// generic WRONGTYPE, a string that is not an HLL is HLL's WRONGTYPE.
fn hll_value(ctx: &Ctx<'_>, key: &[u8], meta: Option<Meta>) -> Result<Option<Meta>, CmdError> {
    match meta {
        None => Ok(None),
        // A segmented bitmap is a string too: checked like any other, but read whole only when
        // its first bytes are an HLL header (it never is one unless written to look like it).
        Some(m) if m.kind == Kind::Bitmap => {
            let header = 0..hll::HEADER_LEN as u64;
            let view = ctx.latest();
            let head = segments::load(
                &view,
                ctx.db(),
                key,
                &m,
                Some(std::slice::from_ref(&header)),
            )?;
            let mut bytes = [0u8; hll::HEADER_LEN];
            head.read_at(0, &mut bytes);
            if &bytes[..4] != b"HYLL" {
                return Err(hll::HllError::NotHll.into());
            }
            let value = ctx.bitmap_string(key, &m)?;
            hll::validate(&value)?;
            Ok(Some(Meta::string(value, m.expire_at_ms)))
        }
        Some(m) if m.kind != Kind::String => Err(CmdError::wrong_type()),
        Some(m) => {
            hll::validate(&m.value)?;
            Ok(Some(m))
        }
    }
}

/// The keys of a multi-key PFCOUNT or PFMERGE, each checked and folded into the union's
/// registers in argument order, so the first bad key gives the error (its type, then whether it
/// is an HLL, then whether its registers decode), as Redis's loop does. Returns each key's
/// record (`None` if absent) and the union's registers.
#[allow(clippy::type_complexity)]
fn union(
    ctx: &Ctx<'_>,
    keys: &[bytes::Bytes],
) -> Result<(Vec<Option<Meta>>, Box<[u8; hll::REGISTERS]>), CmdError> {
    let mut max = Box::new([0u8; hll::REGISTERS]);
    let mut metas = Vec::with_capacity(keys.len());
    for key in keys {
        let meta = hll_value(ctx, key, ctx.lookup_read(key)?)?;
        if let Some(m) = &meta {
            hll::merge_registers(&m.value, &mut max)?;
        }
        metas.push(meta);
    }
    Ok((metas, max))
}

/// Stores `value` under `key` as a string with expiry `expire_at_ms`.
fn store(ctx: &Ctx<'_>, key: &[u8], value: Vec<u8>, expire_at_ms: u64) -> CmdResult {
    let storage = ctx.storage();
    let mut batch = Batch::default();
    batch.put_meta(storage, ctx.db(), key, &Meta::string(value, expire_at_ms));
    ctx.commit(batch)?;
    Ok(())
}

/// PFADD key [element ...]: 1 if a register changed or the key was created.
fn pfadd(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let key = &args[1];
    let _guard = ctx.lock_keys(&[key])?;
    let current = hll_value(ctx, key, ctx.lookup_write(key)?)?;
    let expire_at_ms = current.as_ref().map_or(0, |m| m.expire_at_ms);
    let elements = args[2..].iter().map(|e| &e[..]);
    let (value, changed) = hll::pfadd(current.map(|m| m.value), elements, SPARSE_MAX_BYTES)?;
    if changed {
        store(ctx, key, value, expire_at_ms)?;
        ctx.notify(Class::String, "pfadd", key);
    }
    ctx.out.int(i64::from(changed));
    Ok(())
}

/// PFCOUNT key [key ...]: one key answers (and caches) its own estimate; several keys the
/// estimate of their union, with no write.
fn pfcount(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let keys = &args[1..];
    if keys.len() > 1 {
        let (_, max) = union(ctx, keys)?;
        let mut histo = [0u32; 64];
        for &r in max.iter() {
            histo[usize::from(r)] += 1;
        }
        ctx.out.int(hll::count_histogram(&histo) as i64);
        return Ok(());
    }
    let key = &keys[0];
    let _guard = ctx.lock_keys(&[key])?;
    let Some(mut meta) = hll_value(ctx, key, ctx.lookup_read(key)?)? else {
        ctx.out.int(0);
        return Ok(());
    };
    let (count, changed) = hll::pfcount(&mut meta.value)?;
    if changed {
        store(ctx, key, meta.value, meta.expire_at_ms)?;
    }
    ctx.out.int(count as i64);
    Ok(())
}

/// PFMERGE destkey [sourcekey ...]: the union into `destkey` (which is also a source).
fn pfmerge(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let keys: Vec<&[u8]> = args[1..].iter().map(|k| &k[..]).collect();
    let _guard = ctx.storage().lock(ctx.db(), &keys);
    let (mut values, _) = union(ctx, &args[1..])?;
    let dest = values.remove(0);
    let sources: Vec<Vec<u8>> = values.into_iter().flatten().map(|m| m.value).collect();
    let expire_at_ms = dest.as_ref().map_or(0, |m| m.expire_at_ms);
    let value = hll::pfmerge(
        dest.map(|m| m.value),
        sources.iter().map(|v| &v[..]),
        SPARSE_MAX_BYTES,
    )?;
    store(ctx, keys[0], value, expire_at_ms)?;
    ctx.notify(Class::String, "pfadd", keys[0]);
    ctx.out.ok();
    Ok(())
}

/// PFDEBUG GETREG|DECODE|ENCODING|TODENSE key. GETREG and TODENSE leave a sparse value dense.
fn pfdebug(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let sub = args[1].to_ascii_lowercase();
    let key = &args[2];
    let _guard = ctx.storage().lock(ctx.db(), &[key]);
    let Some(mut meta) = hll_value(ctx, key, ctx.lookup_write(key)?)? else {
        return Err(CmdError::fixed("The specified key does not exist"));
    };
    let densify = |ctx: &Ctx<'_>, meta: &mut Meta| -> Result<bool, CmdError> {
        let converted = hll::to_dense(&mut meta.value)?;
        if converted {
            store(ctx, key, meta.value.clone(), meta.expire_at_ms)?;
        }
        Ok(converted)
    };
    match sub.as_slice() {
        b"getreg" => {
            densify(ctx, &mut meta)?;
            let regs = hll::registers(&meta.value)?;
            ctx.out.array(regs.len());
            for r in regs {
                ctx.out.int(i64::from(r));
            }
        }
        b"decode" => match hll::decode_sparse(&meta.value)? {
            Some(text) => ctx.out.bulk(text.as_bytes()),
            None => return Err(CmdError::fixed("HLL encoding is not sparse")),
        },
        b"encoding" => ctx.out.simple(match hll::validate(&meta.value)? {
            hll::Encoding::Dense => "dense",
            hll::Encoding::Sparse => "sparse",
        }),
        b"todense" => {
            let converted = densify(ctx, &mut meta)?;
            ctx.out.int(i64::from(converted));
        }
        _ => {
            return Err(CmdError::err(format_args!(
                "Unknown PFDEBUG subcommand '{}'",
                String::from_utf8_lossy(&args[1])
            )))
        }
    }
    Ok(())
}

/// PFSELFTEST: checks the encodings against each other (sparse and dense registers and counts
/// agree after random additions, and the estimate is within the expected error), `+OK` if so.
fn pfselftest(ctx: &mut Ctx<'_>, _args: &Args) -> CmdResult {
    let elements: Vec<[u8; 8]> = (0..5000u64)
        .map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15).to_le_bytes())
        .collect();
    let (sparse, _) = hll::pfadd(None, elements.iter().map(|e| &e[..]), usize::MAX)?;
    let mut dense = hll::new_sparse();
    hll::to_dense(&mut dense)?;
    let (mut dense, _) = hll::pfadd(Some(dense), elements.iter().map(|e| &e[..]), 0)?;
    let mut sparse_counted = sparse.clone();
    let (a, _) = hll::pfcount(&mut sparse_counted)?;
    let (b, _) = hll::pfcount(&mut dense)?;
    let same = hll::registers(&sparse)? == hll::registers(&dense)? && a == b;
    // 1.04 / sqrt(16384) is 0.81%; allow five standard errors.
    let close = (a as f64 - 5000.0).abs() / 5000.0 < 0.05;
    if !(same && close) {
        return Err(CmdError::err(format_args!(
            "TESTFAILED sparse and dense representations disagree ({a} vs {b})"
        )));
    }
    ctx.out.ok();
    Ok(())
}
