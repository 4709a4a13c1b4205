//! Differential test of `kvik_types::stream_id` against redis-server: XADD with random
//! explicit, partial, automatic and malformed IDs must be accepted or refused as Redis does and
//! give the same IDs; XRANGE / XREVRANGE with random bounds must return the same entries.

mod common;

use common::*;
use kvik_types::stream_id::{self, AddId, StreamId};
use rand::seq::SliceRandom;
use rand::Rng;

fn number(rng: &mut impl Rng, near: u64) -> String {
    match rng.gen_range(0..14) {
        0 => "0".into(),
        1 => u64::MAX.to_string(),
        2 => "18446744073709551616".into(),
        3 => [" 5", "+5", "007", "-0", "", "x", "-1", " -3", "1.5"]
            .choose(rng)
            .unwrap()
            .to_string(),
        _ => near
            .saturating_add(rng.gen_range(0..3))
            .saturating_sub(1)
            .to_string(),
    }
}

fn id_arg(rng: &mut impl Rng, last: StreamId, for_add: bool) -> String {
    match rng.gen_range(0..12) {
        0 if for_add => "*".into(),
        0 => ["-", "+"].choose(rng).unwrap().to_string(),
        1 => number(rng, last.ms),
        2 if for_add => format!("{}-*", number(rng, last.ms)),
        3 => ["-", "+", "*", "1-2-3", "5-", "-5", "*-1", "1-*x", "abc", ""]
            .choose(rng)
            .unwrap()
            .to_string(),
        _ => format!("{}-{}", number(rng, last.ms), number(rng, last.seq)),
    }
}

fn bound_arg(rng: &mut impl Rng, ids: &[StreamId]) -> String {
    let base = ids
        .choose(rng)
        .copied()
        .unwrap_or(StreamId::new(rng.gen_range(0..5), rng.gen_range(0..5)));
    let plain = match rng.gen_range(0..6) {
        0 => base.ms.to_string(),
        1 => [
            "-",
            "+",
            "0-0",
            "18446744073709551615-18446744073709551615",
            "x",
            "(",
        ]
        .choose(rng)
        .unwrap()
        .to_string(),
        _ => base.to_string(),
    };
    if rng.gen_bool(0.3) {
        format!("({plain}")
    } else {
        plain
    }
}

fn entries(ids: &[StreamId]) -> String {
    let parts: Vec<String> = ids.iter().map(|id| format!("[{id}, [f, v]]")).collect();
    format!("[{}]", parts.join(", "))
}

#[test]
fn xadd_and_xrange_ids_match_redis() {
    let redis = RedisServer::start(&[]);
    let mut con = redis.client();
    let mut rng = rng("stream_id");
    let mut ids: Vec<StreamId> = Vec::new();
    let mut last = StreamId::MIN;
    let mut outcomes: std::collections::BTreeMap<String, usize> = Default::default();
    for step in 0..20000 {
        if step % 250 == 0 {
            run(&mut con, &[b"DEL", b"s"]);
            ids.clear();
            last = StreamId::MIN;
            if rng.gen_bool(0.15) {
                // Start near the top of the ID space.
                let top = StreamId::new(u64::MAX, u64::MAX - 2);
                run(
                    &mut con,
                    &[b"XADD", b"s", top.to_string().as_bytes(), b"f", b"v"],
                );
                ids.push(top);
                last = top;
            }
        }
        if rng.gen_bool(0.6) {
            let arg = id_arg(&mut rng, last, true);
            let theirs = run(&mut con, &[b"XADD", b"s", arg.as_bytes(), b"f", b"v"]);
            let ours = match stream_id::parse_add_id(arg.as_bytes()) {
                Err(e) => e.to_string(),
                Ok(AddId::Auto) => {
                    // The clock is Redis's: take its ms when it answered with one.
                    let now = theirs
                        .split('-')
                        .next()
                        .and_then(|ms| ms.parse().ok())
                        .unwrap_or(0);
                    match stream_id::next_id(last, AddId::Auto, now) {
                        Ok(id) => id.to_string(),
                        Err(e) => e.to_string(),
                    }
                }
                Ok(add) => match stream_id::next_id(last, add, 0) {
                    Ok(id) => id.to_string(),
                    Err(e) => e.to_string(),
                },
            };
            // Redis 7.0 answers `ms-*` after `ms-MAX` from a stale errno (see next_id).
            let stale_errno_case = matches!(
                stream_id::parse_add_id(arg.as_bytes()),
                Ok(AddId::AutoSeq(ms)) if ms == last.ms && last.seq == u64::MAX
            ) && theirs == "ERR Elements are too large to be stored";
            if !stale_errno_case {
                assert_eq!(ours, theirs, "step {step}: XADD s {arg:?} after {last}");
            }
            let kind = if ours.starts_with("ERR") {
                ours.clone()
            } else {
                "added".into()
            };
            *outcomes.entry(kind).or_default() += 1;
            if let Ok(id) = stream_id::parse_id(ours.as_bytes(), 0) {
                if !ours.starts_with("ERR") {
                    ids.push(id);
                    last = id;
                }
            }
        } else {
            let rev = rng.gen_bool(0.3);
            let (a, b) = (bound_arg(&mut rng, &ids), bound_arg(&mut rng, &ids));
            let cmd: &[u8] = if rev { b"XREVRANGE" } else { b"XRANGE" };
            let theirs = run(&mut con, &[cmd, b"s", a.as_bytes(), b.as_bytes()]);
            // XREVRANGE takes end first; Redis parses the start bound first either way.
            let (start_arg, end_arg) = if rev { (&b, &a) } else { (&a, &b) };
            let ours = stream_id::parse_range_start(start_arg.as_bytes()).and_then(|start| {
                stream_id::parse_range_end(end_arg.as_bytes()).map(|end| (start, end))
            });
            let ours = match ours {
                Err(e) => e.to_string(),
                Ok((start, end)) => {
                    let mut hit: Vec<StreamId> = ids
                        .iter()
                        .copied()
                        .filter(|id| *id >= start && *id <= end)
                        .collect();
                    if rev {
                        hit.reverse();
                    }
                    entries(&hit)
                }
            };
            let name = if rev { "XREVRANGE" } else { "XRANGE" };
            assert_eq!(ours, theirs, "step {step}: {name} s {a:?} {b:?}");
            let kind = if ours.starts_with("ERR") {
                ours.clone()
            } else {
                format!("{name} ok")
            };
            *outcomes.entry(kind).or_default() += 1;
        }
    }
    eprintln!("stream_id outcomes: {outcomes:#?}");
    assert!(
        outcomes.len() >= 8,
        "every outcome was exercised: {outcomes:?}"
    );
}
