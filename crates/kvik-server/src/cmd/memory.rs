//! MEMORY USAGE / STATS / DOCTOR / MALLOC-STATS / PURGE / HELP, answered from what kvik's
//! memory is: the process (RSS), the hot cache, RocksDB's block cache and write buffers, all
//! under one budget (`storage::budget`). A key's "memory usage" is the size of its records
//! (key, value or members, and a per-record overhead): what it takes in the hot cache or the
//! block cache when it is read, and about what it takes on disk before compression.

use super::ctx::{Args, CmdError, CmdResult, Ctx};
use super::spec::{CommandSpec, Flags, KeySpec};
use crate::stats::info::{bytes_to_human, used_and_peak};
use crate::storage::{Cf, Coll};

/// Bytes counted per record on top of its key and value (the meta header, the database and
/// slot prefix, RocksDB's own per-entry cost in memtables and blocks).
const RECORD_OVERHEAD: u64 = 48;
/// Members MEMORY USAGE reads of a collection without SAMPLES (Redis's default, 5).
const DEFAULT_SAMPLES: u64 = 5;

const SUB_RO: Flags = Flags::READONLY;

static SUBS: &[CommandSpec] = &[
    CommandSpec::new("doctor", 2, Flags::empty(), KeySpec::NONE, doctor)
        .acl(&["slow"])
        .group("server")
        .doc("Outputs a memory problems report.", "4.0.0", "O(1)"),
    CommandSpec::new(
        "help",
        2,
        Flags::LOADING.union(Flags::STALE),
        KeySpec::NONE,
        help,
    )
    .acl(&["slow"])
    .group("server")
    .doc(
        "Returns helpful text about the different subcommands.",
        "4.0.0",
        "O(1)",
    ),
    CommandSpec::new(
        "malloc-stats",
        2,
        Flags::empty(),
        KeySpec::NONE,
        malloc_stats,
    )
    .acl(&["slow"])
    .group("server")
    .doc(
        "Returns the allocator statistics.",
        "4.0.0",
        "Depends on how much memory is allocated, could be slow",
    ),
    CommandSpec::new("purge", 2, Flags::empty(), KeySpec::NONE, purge)
        .acl(&["slow"])
        .group("server")
        .doc(
            "Asks the allocator to release memory.",
            "4.0.0",
            "Depends on how much memory is allocated, could be slow",
        ),
    CommandSpec::new("stats", 2, Flags::empty(), KeySpec::NONE, stats)
        .acl(&["slow"])
        .group("server")
        .doc("Returns details about memory usage.", "4.0.0", "O(1)"),
    CommandSpec::new(
        "usage",
        -3,
        SUB_RO,
        KeySpec {
            first: 2,
            last: 2,
            step: 1,
        },
        usage,
    )
    .acl(&["read", "slow"])
    .group("server")
    .doc(
        "Estimates the memory usage of a key.",
        "4.0.0",
        "O(N) where N is the number of samples.",
    ),
];

pub static COMMANDS: &[CommandSpec] = &[CommandSpec::new(
    "memory",
    -2,
    Flags::empty(),
    KeySpec::NONE,
    super::spec::container,
)
.acl(&["slow"])
.group("server")
.doc(
    "A container for memory diagnostics commands.",
    "4.0.0",
    "Depends on subcommand.",
)
.subs(SUBS)];

/// MEMORY USAGE key [SAMPLES count]: bytes of the key's records; a collection's members are
/// sampled (`count` of them, 0 for all) and the total extrapolated to its length.
fn usage(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let mut samples = DEFAULT_SAMPLES;
    let mut i = 3;
    while i < args.len() {
        if !args[i].eq_ignore_ascii_case(b"samples") || i + 1 >= args.len() {
            return Err(CmdError::syntax());
        }
        let n = kvik_resp::parse_i64(&args[i + 1]).ok_or(CmdError::not_integer())?;
        if n < 0 {
            return Err(CmdError::syntax());
        }
        samples = n as u64;
        i += 2;
    }
    let key = &args[2];
    let db = ctx.db();
    let view = ctx.storage().view();
    let Some(meta) = view.get_live(db, key, ctx.now_ms)? else {
        ctx.out.null();
        return Ok(());
    };
    let mut bytes = key.len() as u64 + meta.value.len() as u64 + RECORD_OVERHEAD;
    if meta.is_collection() && meta.len > 0 {
        let coll = Coll::new(db, key, &meta);
        let (mut seen, mut member_bytes) = (0u64, 0u64);
        view.for_each_member(Cf::Data, &coll, |m, v| {
            seen += 1;
            member_bytes += (m.len() + v.len()) as u64 + RECORD_OVERHEAD;
            samples == 0 || seen < samples
        })?;
        bytes += (member_bytes * meta.len).checked_div(seen).unwrap_or(0);
    }
    ctx.out.int(bytes as i64);
    Ok(())
}

/// MEMORY STATS: Redis's fields, filled with kvik's numbers (the allocator's are the process's
/// RSS; the dataset is what the hot cache and the block cache hold), then kvik's own.
fn stats(ctx: &mut Ctx<'_>, _args: &Args) -> CmdResult {
    let server = ctx.server;
    let st = &server.storage;
    let (used, peak) = used_and_peak();
    let hot = st.cache().used_memory() as u64;
    let shared = st.shared();
    let block = shared.block_cache.get_usage() as u64;
    let write_buffers = shared.write_buffers.get_usage() as u64;
    let dataset = hot + block;
    let clients: u64 = server
        .clients
        .snapshot()
        .iter()
        .map(|c| {
            (c.qbuf.load(std::sync::atomic::Ordering::Relaxed)
                + c.obuf.load(std::sync::atomic::Ordering::Relaxed)) as u64
        })
        .sum();
    let keys: u64 = (0..server.config.databases())
        .map(|db| st.key_count(st.dbs().physical(db)))
        .sum();
    let pct = |part: u64, whole: u64| part as f64 * 100.0 / whole.max(1) as f64;
    enum V {
        Int(u64),
        Float(f64),
    }
    let fields: Vec<(&str, V)> = vec![
        ("peak.allocated", V::Int(peak)),
        ("total.allocated", V::Int(used)),
        ("startup.allocated", V::Int(0)),
        ("replication.backlog", V::Int(0)),
        ("clients.slaves", V::Int(0)),
        ("clients.normal", V::Int(clients)),
        ("cluster.links", V::Int(0)),
        ("aof.buffer", V::Int(0)),
        ("lua.caches", V::Int(0)),
        ("functions.caches", V::Int(0)),
        ("overhead.total", V::Int(used.saturating_sub(dataset))),
        ("keys.count", V::Int(keys)),
        ("keys.bytes-per-key", V::Int(used / keys.max(1))),
        ("dataset.bytes", V::Int(dataset)),
        ("dataset.percentage", V::Float(pct(dataset, used))),
        ("peak.percentage", V::Float(pct(used, peak))),
        ("allocator.allocated", V::Int(used)),
        ("allocator.active", V::Int(used)),
        ("allocator.resident", V::Int(used)),
        ("allocator-fragmentation.ratio", V::Float(1.0)),
        ("allocator-fragmentation.bytes", V::Int(0)),
        ("allocator.rss-ratio", V::Float(1.0)),
        ("allocator.rss-bytes", V::Int(0)),
        ("rss-overhead.ratio", V::Float(1.0)),
        ("rss-overhead.bytes", V::Int(0)),
        ("fragmentation", V::Float(1.0)),
        ("fragmentation.bytes", V::Int(0)),
        ("kvik.hot-cache.bytes", V::Int(hot)),
        ("kvik.block-cache.bytes", V::Int(block)),
        ("kvik.write-buffers.bytes", V::Int(write_buffers)),
        ("kvik.maxmemory", V::Int(server.config.memory_split().total)),
    ];
    ctx.out.map(fields.len());
    for (name, v) in fields {
        ctx.out.bulk(name.as_bytes());
        match v {
            V::Int(n) => ctx.out.int(n as i64),
            V::Float(f) => ctx.out.double(f),
        }
    }
    Ok(())
}

/// MEMORY DOCTOR: a short report on the memory budget.
fn doctor(ctx: &mut Ctx<'_>, _args: &Args) -> CmdResult {
    let server = ctx.server;
    let split = server.config.memory_split();
    let (used, peak) = used_and_peak();
    let budget = split.total;
    let mut report =
        format!(
        "kvik memory report: the process uses {} (peak {}) under a budget (maxmemory) of {}{}.\n",
        bytes_to_human(used),
        bytes_to_human(peak),
        bytes_to_human(budget),
        if split.auto { ", chosen from the machine's memory" } else { "" },
    );
    if used > budget.saturating_add(128 << 20) {
        report.push_str(
            "* The process is more than 128 MB above its budget: look at client buffers (CLIENT LIST omem) and big MULTI queues or scripts.\n",
        );
    } else {
        report.push_str(
            "* No memory problem found: every key is on disk, the caches stay within the budget.\n",
        );
    }
    ctx.out.verbatim(report.as_bytes());
    Ok(())
}

/// MEMORY MALLOC-STATS: kvik runs on the system allocator, as a Redis built with libc.
fn malloc_stats(ctx: &mut Ctx<'_>, _args: &Args) -> CmdResult {
    ctx.out
        .verbatim(b"Stats not supported for the current allocator");
    Ok(())
}

/// MEMORY PURGE: nothing to ask of the system allocator.
fn purge(ctx: &mut Ctx<'_>, _args: &Args) -> CmdResult {
    ctx.out.ok();
    Ok(())
}

fn help(ctx: &mut Ctx<'_>, _args: &Args) -> CmdResult {
    super::admin::help_reply(
        ctx.out,
        "MEMORY",
        &[
            "DOCTOR",
            "    Return memory problems reports.",
            "MALLOC-STATS",
            "    Return internal statistics report from the memory allocator.",
            "PURGE",
            "    Attempt to purge dirty pages for reclamation by the allocator.",
            "STATS",
            "    Return information about the memory usage of the server.",
            "USAGE <key> [SAMPLES <count>]",
            "    Return memory in bytes used by <key> and its value. Nested values are",
            "    sampled up to <count> times (default: 5, 0 means sample all).",
        ],
    );
    Ok(())
}
