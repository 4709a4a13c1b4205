//! LATENCY LATEST / HISTORY / RESET / DOCTOR / GRAPH / HISTOGRAM / HELP over
//! `stats::latency` (the monitor records events at or above `latency-monitor-threshold` ms:
//! `command`, `fast-command` and `expire-cycle`; histograms are kept per command while
//! `latency-tracking` is on).

use super::ctx::{Args, CmdError, CmdResult, Ctx};
use super::spec::{CommandSpec, Flags, KeySpec};
use super::table;

const SUB: Flags = Flags::ADMIN
    .union(Flags::NOSCRIPT)
    .union(Flags::LOADING)
    .union(Flags::STALE);
const ACL: &[&str] = &["admin", "slow", "dangerous"];

static SUBS: &[CommandSpec] = &[
    CommandSpec::new("doctor", 2, SUB, KeySpec::NONE, doctor)
        .acl(ACL)
        .group("server")
        .doc(
            "Returns a human-readable latency analysis report.",
            "2.8.13",
            "O(1)",
        ),
    CommandSpec::new("graph", 3, SUB, KeySpec::NONE, graph)
        .acl(ACL)
        .group("server")
        .doc("Returns a latency graph for an event.", "2.8.13", "O(1)"),
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
        "2.8.13",
        "O(1)",
    ),
    CommandSpec::new("histogram", -2, SUB, KeySpec::NONE, histogram)
        .acl(ACL)
        .group("server")
        .doc(
            "Returns the cumulative distribution of latencies of a subset or all commands.",
            "7.0.0",
            "O(N) where N is the number of commands with latency information being retrieved.",
        ),
    CommandSpec::new("history", 3, SUB, KeySpec::NONE, history)
        .acl(ACL)
        .group("server")
        .doc(
            "Returns timestamp-latency samples for an event.",
            "2.8.13",
            "O(1)",
        ),
    CommandSpec::new("latest", 2, SUB, KeySpec::NONE, latest)
        .acl(ACL)
        .group("server")
        .doc(
            "Returns the latest latency samples for all events.",
            "2.8.13",
            "O(1)",
        ),
    CommandSpec::new("reset", -2, SUB, KeySpec::NONE, reset)
        .acl(ACL)
        .group("server")
        .doc(
            "Resets the latency data for one or more events.",
            "2.8.13",
            "O(1)",
        ),
];

pub static COMMANDS: &[CommandSpec] = &[CommandSpec::new(
    "latency",
    -2,
    Flags::empty(),
    KeySpec::NONE,
    super::spec::container,
)
.acl(&["slow"])
.group("server")
.doc(
    "A container for latency diagnostics commands.",
    "2.8.13",
    "Depends on subcommand.",
)
.subs(SUBS)];

fn latest(ctx: &mut Ctx<'_>, _args: &Args) -> CmdResult {
    let events = ctx.server.latency.latest();
    ctx.out.array(events.len());
    for (name, time, last, max) in events {
        ctx.out.array(4);
        ctx.out.bulk(name.as_bytes());
        ctx.out.int(time as i64);
        ctx.out.int(last as i64);
        ctx.out.int(max as i64);
    }
    Ok(())
}

fn history(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let samples = ctx.server.latency.history(&args[2]);
    ctx.out.array(samples.len());
    for (time, ms) in samples {
        ctx.out.array(2);
        ctx.out.int(time as i64);
        ctx.out.int(ms as i64);
    }
    Ok(())
}

fn reset(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let names: Vec<&[u8]> = args[2..].iter().map(|a| &a[..]).collect();
    let n = ctx.server.latency.reset(&names);
    ctx.out.int(n as i64);
    Ok(())
}

/// LATENCY GRAPH event: the event's samples as text, one line each (Redis draws ASCII art).
fn graph(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let samples = ctx.server.latency.history(&args[2]);
    let name = String::from_utf8_lossy(&args[2]);
    if samples.is_empty() {
        return Err(CmdError::err(format_args!(
            "No samples available for event '{name}'"
        )));
    }
    let max = samples.iter().map(|s| s.1).max().unwrap_or(0);
    let mut text = format!(
        "{name} - high {max} ms, low {} ms\n",
        samples.iter().map(|s| s.1).min().unwrap_or(0)
    );
    for (time, ms) in samples {
        let bar = "#".repeat(((ms * 40) / max.max(1)).max(1) as usize);
        text.push_str(&format!("{time} {ms:>6} ms {bar}\n"));
    }
    ctx.out.verbatim(text.as_bytes());
    Ok(())
}

fn doctor(ctx: &mut Ctx<'_>, _args: &Args) -> CmdResult {
    let events = ctx.server.latency.latest();
    let mut report = String::new();
    if events.is_empty() {
        report.push_str("kvik latency report: no latency event reached latency-monitor-threshold");
        report.push_str(" (0 turns the monitor off; set it to a number of milliseconds).\n");
    } else {
        report.push_str("kvik latency report:\n");
        for (name, _, last, max) in events {
            let samples = ctx.server.latency.history(name.as_bytes());
            let avg = samples.iter().map(|s| s.1).sum::<u64>() / samples.len().max(1) as u64;
            report.push_str(&format!(
                "* {name}: {} latency spikes (average {avg} ms, last {last} ms, worst {max} ms).\n",
                samples.len()
            ));
        }
        report.push_str(
            "Slow commands: see SLOWLOG GET; RocksDB write stalls and compactions: INFO rocksdb.\n",
        );
    }
    ctx.out.verbatim(report.as_bytes());
    Ok(())
}

/// LATENCY HISTOGRAM [command ...]: per command that ran, its calls and the cumulative count
/// of calls under each power of two of microseconds. A container's name stands for its
/// subcommands.
fn histogram(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let t = table();
    let wanted: Vec<String> = args[2..]
        .iter()
        .map(|a| String::from_utf8_lossy(a).to_ascii_lowercase())
        .collect();
    let mut rows = Vec::new();
    for id in 0..t.len() {
        let name = &t.entry(id).full_name;
        let top = name.split('|').next().unwrap_or(name);
        if !wanted.is_empty() && !wanted.iter().any(|w| w == name || w == top) {
            continue;
        }
        if let Some(h) = ctx.server.latency.histogram(id) {
            rows.push((name.clone(), h.count(), h.cumulative()));
        }
    }
    ctx.out.map(rows.len());
    for (name, calls, buckets) in rows {
        ctx.out.bulk(name.as_bytes());
        ctx.out.map(2);
        ctx.out.bulk(b"calls");
        ctx.out.int(calls as i64);
        ctx.out.bulk(b"histogram_usec");
        ctx.out.map(buckets.len());
        for (bound, count) in buckets {
            ctx.out.int(bound as i64);
            ctx.out.int(count as i64);
        }
    }
    Ok(())
}

fn help(ctx: &mut Ctx<'_>, _args: &Args) -> CmdResult {
    super::admin::help_reply(
        ctx.out,
        "LATENCY",
        &[
            "DOCTOR",
            "    Return a human readable latency analysis report.",
            "GRAPH <event>",
            "    Return the samples of <event> as text.",
            "HISTORY <event>",
            "    Return time-latency samples for the <event> class.",
            "LATEST",
            "    Return the latest latency samples for all events.",
            "RESET [<event> ...]",
            "    Reset latency data of one or more <event> classes.",
            "    (default: reset all data for all event classes)",
            "HISTOGRAM [COMMAND ...]",
            "    Return a cumulative distribution of latencies in the format of a histogram for the specified command names.",
            "    If no commands are specified then all histograms are replied.",
        ],
    );
    Ok(())
}
