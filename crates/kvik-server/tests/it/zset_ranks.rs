//! Rank indexes of big sorted sets (`zset-rank-index-min-len`, `cache::rank`): ZRANK,
//! ZREVRANK, ZCOUNT, ZRANGE by rank, score ranges with far LIMIT offsets and ZREMRANGEBYRANK
//! of a set the hot cache holds (and ZLEXCOUNT and lex ranges of a set of one score) count
//! the members before a place through the index and walk only inside one bucket. A count that
//! drifted from the set shows as a wrong rank, so every query is checked against a model
//! through the writes that keep the index (ZADD, ZINCRBY, ZREM, ZPOPMIN, ZPOPMAX,
//! ZREMRANGEBYSCORE, ZREMRANGEBYRANK, in MULTI/EXEC
//! and scripts too) and those that drop the set's cache entry and the index with it (EXPIRE,
//! RENAME, ZUNIONSTORE onto it); INFO must show the answers came through an index that the
//! writes kept (few builds). A second test has readers on the workers check, while a writer
//! moves a member back and forth across the others, that no answer mixes the index of one
//! state with the members of another (readers lock their key on a worker, and an index's
//! answer stands only if no write of the set began or ended since its fill token: an index
//! updated after its writer let go of the key would show).

use crate::common::*;
use redis::Connection;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

fn member(n: u64) -> String {
    format!("m{n:05}")
}

/// ZADDs `member(i)` at score `i` to `key` for each `i` of `ids`, 2,000 to a command.
fn add_ranked(c: &mut Connection, key: &str, ids: std::ops::Range<u64>) {
    let ids: Vec<u64> = ids.collect();
    for chunk in ids.chunks(2_000) {
        let mut cmd = redis::cmd("ZADD");
        cmd.arg(key);
        for &i in chunk {
            cmd.arg(i).arg(member(i));
        }
        let _: i64 = cmd.query(c).unwrap();
    }
}

/// The sorted set as the server orders it: by score, then by member bytes.
fn ordered(model: &BTreeMap<String, i64>) -> Vec<(i64, String)> {
    let mut v: Vec<(i64, String)> = model.iter().map(|(m, s)| (*s, m.clone())).collect();
    v.sort();
    v
}

fn rank_stats(c: &mut Connection) -> (u64, u64) {
    (
        info_field(c, "stats", "zset_rank_index_builds").unwrap(),
        info_field(c, "stats", "zset_rank_index_answers").unwrap(),
    )
}

/// ZRANK, ZREVRANK, ZCOUNT and ZRANGE by rank of `key` against the model.
fn check_queries(c: &mut Connection, key: &str, model: &BTreeMap<String, i64>, rng: &mut Lcg) {
    let order = ordered(model);
    let len = order.len() as u64;
    assert_eq!(q::<u64>(c, &["ZCARD", key]), len);
    for _ in 0..4 {
        let i = rng.below(len);
        let m = &order[i as usize].1;
        assert_eq!(
            q::<Option<u64>>(c, &["ZRANK", key, m]),
            Some(i),
            "ZRANK {m}"
        );
        assert_eq!(
            q::<Option<u64>>(c, &["ZREVRANK", key, m]),
            Some(len - 1 - i),
            "ZREVRANK {m}"
        );
    }
    assert_eq!(q::<Option<u64>>(c, &["ZRANK", key, "absent"]), None);
    for _ in 0..4 {
        let (a, b) = (rng.below(1100) as i64 - 50, rng.below(1100) as i64 - 50);
        // An end is now and then open (-inf, +inf: counted without the index's walk).
        let lo = Some(a.min(b)).filter(|_| rng.below(4) != 0);
        let hi = Some(a.max(b)).filter(|_| rng.below(4) != 0);
        let (loex, hiex) = (rng.below(2) == 1, rng.below(2) == 1);
        let want = model
            .values()
            .filter(|&&s| {
                lo.is_none_or(|lo| if loex { s > lo } else { s >= lo })
                    && hi.is_none_or(|hi| if hiex { s < hi } else { s <= hi })
            })
            .count() as u64;
        let arg = |v: Option<i64>, inf: &str, ex: bool| {
            let v = v.map_or(inf.to_string(), |v| v.to_string());
            if ex {
                format!("({v}")
            } else {
                v
            }
        };
        let (los, his) = (arg(lo, "-inf", loex), arg(hi, "+inf", hiex));
        let got: u64 = q(c, &["ZCOUNT", key, &los, &his]);
        assert_eq!(got, want, "ZCOUNT {los} {his}");
    }
    let start = rng.below(len);
    let stop = (start + rng.below(20)).min(len - 1);
    let want: Vec<String> = order[start as usize..=stop as usize]
        .iter()
        .map(|(_, m)| m.clone())
        .collect();
    let got: Vec<String> = q(c, &["ZRANGE", key, &start.to_string(), &stop.to_string()]);
    assert_eq!(got, want, "ZRANGE {start} {stop}");
    let mut rev_want = want;
    rev_want.reverse();
    let (rs, re) = (len - 1 - stop, len - 1 - start);
    let got: Vec<String> = q(c, &["ZRANGE", key, &rs.to_string(), &re.to_string(), "REV"]);
    assert_eq!(got, rev_want, "ZRANGE {rs} {re} REV");
    // Score ranges with far offsets (skipped through the index past half a bucket with the
    // scores kept, past two without), both ways.
    let (a, b) = (rng.below(1100) as i64 - 50, rng.below(1100) as i64 - 50);
    let (lo, hi) = (a.min(b), a.max(b));
    // Now and then open ends, spelled -inf and +inf.
    let (lo, hi) = match rng.below(4) {
        0 => (i64::MIN, i64::MAX),
        1 => (lo, i64::MAX),
        _ => (lo, hi),
    };
    let inside: Vec<String> = order
        .iter()
        .filter(|(s, _)| (lo..=hi).contains(s))
        .map(|(_, m)| m.clone())
        .collect();
    let (offset, count) = (rng.below(len), 1 + rng.below(5) as usize);
    let limit = |v: &[String]| -> Vec<String> {
        v.iter()
            .skip(offset as usize)
            .take(count)
            .cloned()
            .collect()
    };
    let end = |v: i64| match v {
        i64::MIN => "-inf".to_string(),
        i64::MAX => "+inf".to_string(),
        v => v.to_string(),
    };
    let (los, his, offs, counts) = (end(lo), end(hi), offset.to_string(), count.to_string());
    let got: Vec<String> = q(
        c,
        &["ZRANGEBYSCORE", key, &los, &his, "LIMIT", &offs, &counts],
    );
    assert_eq!(
        got,
        limit(&inside),
        "ZRANGEBYSCORE {los} {his} LIMIT {offset} {count}"
    );
    // ZRANGESTORE reads its source the same way, under the keys' locks.
    let stored: u64 = q(
        c,
        &[
            "ZRANGESTORE",
            "dst",
            key,
            &los,
            &his,
            "BYSCORE",
            "LIMIT",
            &offs,
            &counts,
        ],
    );
    let got: Vec<String> = q(c, &["ZRANGE", "dst", "0", "-1"]);
    assert_eq!(
        (stored as usize, got),
        (limit(&inside).len(), limit(&inside)),
        "ZRANGESTORE"
    );
    let mut inside_rev = inside;
    inside_rev.reverse();
    let got: Vec<String> = q(
        c,
        &["ZREVRANGEBYSCORE", key, &his, &los, "LIMIT", &offs, &counts],
    );
    assert_eq!(
        got,
        limit(&inside_rev),
        "ZREVRANGEBYSCORE {his} {los} LIMIT {offset} {count}"
    );
}

#[test]
fn ranks_counts_and_rank_ranges_stay_exact_through_writes() {
    ranks_stay_exact_through_writes("yes");
}

#[test]
fn ranks_stay_exact_through_writes_without_the_scores_in_the_index() {
    ranks_stay_exact_through_writes("no");
}

/// Random writes of a 3,000-member set, each followed by [`check_queries`], with the index
/// keeping the members' scores (`zset-rank-index-scores`) or not.
fn ranks_stay_exact_through_writes(scores: &str) {
    let s = TestServer::start_with(&[
        "--zset-rank-index-min-len",
        "500",
        "--zset-rank-index-scores",
        scores,
    ]);
    let mut c = s.client();
    let mut rng = Lcg(11);
    let mut model: BTreeMap<String, i64> = BTreeMap::new();
    // 3,000 members, scores with many ties (members then order them).
    for chunk in 0..30 {
        let mut cmd = redis::cmd("ZADD");
        cmd.arg("z");
        for i in chunk * 100..(chunk + 1) * 100 {
            let score = rng.below(1000) as i64;
            cmd.arg(score).arg(member(i));
            model.insert(member(i), score);
        }
        let _: i64 = cmd.query(&mut c).unwrap();
    }
    let mut drops = 0;
    for step in 0..300 {
        let m = member(rng.below(4000));
        let score = rng.below(1000) as i64;
        match rng.below(12) {
            0..=3 => {
                let _: i64 = q(&mut c, &["ZADD", "z", &score.to_string(), &m]);
                model.insert(m, score);
            }
            4 => {
                let by = rng.below(200) as i64 - 100;
                let _: f64 = q(&mut c, &["ZINCRBY", "z", &by.to_string(), &m]);
                *model.entry(m).or_insert(0) += by;
            }
            5 => {
                let _: i64 = q(&mut c, &["ZREM", "z", &m]);
                model.remove(&m);
            }
            6 => {
                let n = rng.below(5) + 1;
                let (cmd, take_high) = if rng.below(2) == 0 {
                    ("ZPOPMIN", false)
                } else {
                    ("ZPOPMAX", true)
                };
                let _: Vec<String> = q(&mut c, &[cmd, "z", &n.to_string()]);
                for _ in 0..n {
                    let order = ordered(&model);
                    let (_, gone) = if take_high {
                        order.last()
                    } else {
                        order.first()
                    }
                    .unwrap();
                    model.remove(&gone.clone());
                }
            }
            7 if rng.below(2) == 0 => {
                // ZREMRANGEBYRANK finds its first rank through the index.
                let order = ordered(&model);
                let start = rng.below(order.len() as u64 - 3);
                let stop = start + rng.below(3);
                let _: i64 = q(
                    &mut c,
                    &[
                        "ZREMRANGEBYRANK",
                        "z",
                        &start.to_string(),
                        &stop.to_string(),
                    ],
                );
                for (_, gone) in &order[start as usize..=stop as usize] {
                    model.remove(gone);
                }
            }
            7 => {
                let lo = rng.below(1000) as i64;
                let _: i64 = q(
                    &mut c,
                    &["ZREMRANGEBYSCORE", "z", &lo.to_string(), &lo.to_string()],
                );
                model.retain(|_, s| *s != lo);
            }
            8 => {
                let (m2, s2) = (member(rng.below(4000)), rng.below(1000) as i64);
                let _: () = redis::pipe()
                    .atomic()
                    .cmd("ZADD")
                    .arg("z")
                    .arg(score)
                    .arg(&m)
                    .ignore()
                    .cmd("ZREM")
                    .arg("z")
                    .arg(&m2)
                    .ignore()
                    .cmd("ZADD")
                    .arg("z")
                    .arg(s2)
                    .arg(&m2)
                    .ignore()
                    .query(&mut c)
                    .unwrap();
                model.insert(m, score);
                model.insert(m2, s2);
            }
            9 => {
                let _: i64 = redis::cmd("EVAL")
                    .arg("redis.call('zrem', KEYS[1], ARGV[2]); return redis.call('zadd', KEYS[1], ARGV[1], ARGV[2])")
                    .arg(1)
                    .arg("z")
                    .arg(score)
                    .arg(&m)
                    .query(&mut c)
                    .unwrap();
                model.insert(m, score);
            }
            // Writes that drop the cached set and its index: the next query builds it again.
            10 => {
                drops += 1;
                if rng.below(2) == 0 {
                    let _: i64 = q(&mut c, &["EXPIRE", "z", "100000"]);
                } else {
                    let _: () = q(&mut c, &["RENAME", "z", "z2"]);
                    let _: () = q(&mut c, &["RENAME", "z2", "z"]);
                }
            }
            _ => {
                drops += 1;
                let _: i64 = q(&mut c, &["ZUNIONSTORE", "z", "1", "z"]);
            }
        }
        check_queries(&mut c, "z", &model, &mut rng);
        assert!(
            model.len() >= 500,
            "step {step}: the set stays above the index's minimum"
        );
    }
    let (builds, answers) = rank_stats(&mut c);
    // Each query round answers ZRANK x4, ZREVRANK x4, ZCOUNT x3, two ZRANGEs and two score
    // ranges (those that skip far) through the index; most of 300 rounds run on an index kept
    // by the writes.
    assert!(answers > 300 * 8, "answered through an index: {answers}");
    assert!(
        builds <= 1 + drops + 10,
        "{builds} builds for {drops} writes that drop the index: writes must keep it"
    );
    // With the scores, most counts were placed by them alone (a score no member of its
    // bucket has, or a rank of the one member there at its score); without, none.
    let placed = info_field(&mut c, "stats", "zset_rank_index_placed").unwrap();
    if scores == "yes" {
        assert!(placed > 300 * 4, "placed by the scores: {placed}");
    } else {
        assert_eq!(placed, 0);
    }
    // With the index off the same queries still answer (by walking), and none through it.
    let _: () = q(&mut c, &["CONFIG", "SET", "zset-rank-index-min-len", "0"]);
    check_queries(&mut c, "z", &model, &mut rng);
    assert_eq!(rank_stats(&mut c).1, answers);
}

#[test]
fn readers_never_mix_the_index_of_one_state_with_the_members_of_another() {
    // Reads and writes on the workers, connections on both I/O threads: they run at once.
    let s = TestServer::start_with(&[
        "--zset-rank-index-min-len",
        "500",
        "--rtc-storage-read",
        "no",
        "--rtc-write",
        "no",
        "--io-key-affinity",
        "no",
    ]);
    let mut c = s.client();
    // 2,000 members at scores 0..1999 and one, "x", that the writer moves from below them
    // (-1) to above them (5000) and back: in every state a member's rank is its score or its
    // score + 1, and ZCOUNT 0 i is i + 1. ZCOUNT takes two counts from the index; counts of
    // two states, or an index of one state walked on a snapshot of another, show as i or
    // i + 2.
    add_ranked(&mut c, "z", 0..2_000);
    let _: i64 = q(&mut c, &["ZADD", "z", "5000", "x"]);
    let _: Option<u64> = q(&mut c, &["ZRANK", "z", &member(1000)]);
    let until = Instant::now() + Duration::from_secs(3);
    let mut w = s.client();
    let writer = std::thread::spawn(move || {
        let mut rounds = 0u64;
        while Instant::now() < until {
            let _: i64 = q(&mut w, &["ZADD", "z", "-1", "x"]);
            let _: i64 = q(&mut w, &["ZADD", "z", "5000", "x"]);
            rounds += 1;
        }
        rounds
    });
    let readers: Vec<_> = (0..2)
        .map(|k| {
            let mut r = s.client();
            std::thread::spawn(move || {
                let mut rng = Lcg(k + 5);
                let mut checks = 0u64;
                while Instant::now() < until {
                    let i = 600 + rng.below(1400);
                    let n: u64 = q(&mut r, &["ZCOUNT", "z", "0", &i.to_string()]);
                    assert_eq!(n, i + 1, "ZCOUNT 0 {i}");
                    if checks.is_multiple_of(4) {
                        let rank: u64 =
                            q::<Option<u64>>(&mut r, &["ZRANK", "z", &member(i)]).unwrap();
                        assert!(rank == i || rank == i + 1, "ZRANK of score {i}: {rank}");
                        let at: Vec<String> =
                            q(&mut r, &["ZRANGE", "z", &i.to_string(), &i.to_string()]);
                        assert!(
                            at == [member(i)] || at == [member(i - 1)],
                            "ZRANGE {i} {i}: {at:?}"
                        );
                    }
                    checks += 1;
                }
                checks
            })
        })
        .collect();
    let rounds = writer.join().unwrap();
    let checks: u64 = readers.into_iter().map(|t| t.join().unwrap()).sum();
    assert!(
        rounds > 10 && checks > 10,
        "{rounds} write rounds, {checks} checks"
    );
    let (_, answers) = rank_stats(&mut c);
    assert!(answers > 0, "some answers came through the index");
}

#[test]
fn a_set_whose_index_outgrows_the_budget_is_walked_and_not_indexed_again() {
    // cache-maxmemory 2mb: the indexes may take 64 KiB, about 650 fences of 64-byte members,
    // so a set of 100,000 such members (~1,560 fences) is refused and one of 3,000 fits.
    let s = TestServer::start_with(&[
        "--zset-rank-index-min-len",
        "500",
        "--cache-maxmemory",
        "2mb",
    ]);
    let mut c = s.client();
    let long = |i: u64| format!("{}{i:08}", "p".repeat(56));
    for chunk in 0..100u64 {
        let mut cmd = redis::cmd("ZADD");
        cmd.arg("big");
        for i in chunk * 1000..(chunk + 1) * 1000 {
            cmd.arg(i).arg(long(i));
        }
        let _: i64 = cmd.query(&mut c).unwrap();
    }
    for i in [50_000u64, 12_345, 99_999, 70_001] {
        assert_eq!(
            q::<Option<u64>>(&mut c, &["ZRANK", "big", &long(i)]),
            Some(i)
        );
    }
    assert_eq!(q::<u64>(&mut c, &["ZCOUNT", "big", "10", "(20000"]), 19_990);
    assert_eq!(
        rank_stats(&mut c),
        (0, 0),
        "refused: no build, no answer through an index"
    );
    let mut cmd = redis::cmd("ZADD");
    cmd.arg("small");
    for i in 0..3000u64 {
        cmd.arg(i).arg(long(i));
    }
    let _: i64 = cmd.query(&mut c).unwrap();
    assert_eq!(
        q::<Option<u64>>(&mut c, &["ZRANK", "small", &long(1500)]),
        Some(1500)
    );
    assert_eq!(rank_stats(&mut c), (1, 1), "the small set's index fits");
    assert_eq!(
        q::<Option<u64>>(&mut c, &["ZRANK", "big", &long(40_000)]),
        Some(40_000)
    );
    assert_eq!(rank_stats(&mut c).0, 1, "the big set is not built");
    let refusals = info_field(&mut c, "stats", "zset_rank_index_refusals");
    assert_eq!(
        refusals,
        Some(1),
        "one walk found the index too big; no query tried again"
    );
}

/// The members of `model` (one score) in lexicographic range [`lo`, `hi`] bounds as ZRANGEBYLEX
/// takes them (`-`, `+`, `[x`, `(x`).
fn lex_inside(model: &BTreeMap<String, i64>, lo: &str, hi: &str) -> Vec<String> {
    let above = |m: &str| match lo.as_bytes()[0] {
        b'-' => true,
        b'+' => false,
        b'[' => m >= &lo[1..],
        _ => m > &lo[1..],
    };
    let below = |m: &str| match hi.as_bytes()[0] {
        b'+' => true,
        b'-' => false,
        b'[' => m <= &hi[1..],
        _ => m < &hi[1..],
    };
    model
        .keys()
        .filter(|m| above(m) && below(m))
        .cloned()
        .collect()
}

#[test]
fn lex_counts_and_far_lex_offsets_of_a_one_score_set_stay_exact() {
    let s = TestServer::start_with(&["--zset-rank-index-min-len", "500"]);
    let mut c = s.client();
    let mut rng = Lcg(23);
    let mut model: BTreeMap<String, i64> = BTreeMap::new();
    let mut cmd = redis::cmd("ZADD");
    cmd.arg("lex");
    for _ in 0..3000 {
        let m = member(rng.below(10_000));
        cmd.arg(0).arg(&m);
        model.insert(m, 0);
    }
    let _: i64 = cmd.query(&mut c).unwrap();
    let bound = |rng: &mut Lcg| match rng.below(8) {
        0 => "-".to_string(),
        1 => "+".to_string(),
        2..=4 => format!("[{}", member(rng.below(10_000))),
        _ => format!("({}", member(rng.below(10_000))),
    };
    for step in 0..200 {
        let m = member(rng.below(10_000));
        match rng.below(4) {
            0 | 1 => {
                let _: i64 = q(&mut c, &["ZADD", "lex", "0", &m]);
                model.insert(m, 0);
            }
            2 => {
                let _: i64 = q(&mut c, &["ZREM", "lex", &m]);
                model.remove(&m);
            }
            _ => {
                let start = rng.below(model.len() as u64 - 2);
                let _: i64 = q(
                    &mut c,
                    &[
                        "ZREMRANGEBYRANK",
                        "lex",
                        &start.to_string(),
                        &start.to_string(),
                    ],
                );
                let gone = model.keys().nth(start as usize).unwrap().clone();
                model.remove(&gone);
            }
        }
        for _ in 0..3 {
            let (lo, hi) = (bound(&mut rng), bound(&mut rng));
            let inside = lex_inside(&model, &lo, &hi);
            let n: u64 = q(&mut c, &["ZLEXCOUNT", "lex", &lo, &hi]);
            assert_eq!(n, inside.len() as u64, "step {step}: ZLEXCOUNT {lo} {hi}");
            let (offset, count) = (rng.below(model.len() as u64), 1 + rng.below(4) as usize);
            let want: Vec<String> = inside
                .iter()
                .skip(offset as usize)
                .take(count)
                .cloned()
                .collect();
            let (offs, counts) = (offset.to_string(), count.to_string());
            let got: Vec<String> = q(
                &mut c,
                &["ZRANGEBYLEX", "lex", &lo, &hi, "LIMIT", &offs, &counts],
            );
            assert_eq!(
                got, want,
                "step {step}: ZRANGEBYLEX {lo} {hi} LIMIT {offset} {count}"
            );
            let want: Vec<String> = inside
                .iter()
                .rev()
                .skip(offset as usize)
                .take(count)
                .cloned()
                .collect();
            let got: Vec<String> = q(
                &mut c,
                &["ZREVRANGEBYLEX", "lex", &hi, &lo, "LIMIT", &offs, &counts],
            );
            assert_eq!(
                got, want,
                "step {step}: ZREVRANGEBYLEX {hi} {lo} LIMIT {offset} {count}"
            );
        }
    }
    let (_, answers) = rank_stats(&mut c);
    assert!(answers > 200 * 3, "answered through the index: {answers}");

    // Members of two scores: lex ranges walk member order as before, never the index's
    // score order.
    let _: i64 = q(&mut c, &["ZADD", "lex", "1", &member(10_001)]);
    let _: i64 = q(&mut c, &["ZADD", "lex", "-1", &member(10_002)]);
    model.insert(member(10_001), 1);
    model.insert(member(10_002), -1);
    let inside = lex_inside(&model, "-", "+");
    let n: u64 = q(&mut c, &["ZLEXCOUNT", "lex", "-", "(m99999"]);
    assert_eq!(n, inside.len() as u64);
    let offset = inside.len() as u64 - 3;
    let got: Vec<String> = q(
        &mut c,
        &[
            "ZRANGEBYLEX",
            "lex",
            "-",
            "+",
            "LIMIT",
            &offset.to_string(),
            "10",
        ],
    );
    assert_eq!(got, inside[offset as usize..]);
    assert_eq!(rank_stats(&mut c).1, answers, "no answer through the index");
}

#[test]
fn random_members_of_a_big_set_are_drawn_by_rank_uniformly() {
    let s = TestServer::start_with(&["--zset-rank-index-min-len", "500"]);
    let mut c = s.client();
    // Past the largest set dealt into a deck (65,536), so picks come from the index.
    let n = 70_000u64;
    add_ranked(&mut c, "big", 0..n);
    let number = |m: &str| m[1..].parse::<u64>().unwrap();
    let (_, before) = rank_stats(&mut c);
    // Distinct picks with their own scores.
    let pairs: Vec<(String, f64)> = q(&mut c, &["ZRANDMEMBER", "big", "10", "WITHSCORES"]);
    assert_eq!(pairs.len(), 10);
    let distinct: std::collections::BTreeSet<&String> = pairs.iter().map(|(m, _)| m).collect();
    assert_eq!(distinct.len(), 10, "{pairs:?}");
    for (m, score) in &pairs {
        assert_eq!(number(m) as f64, *score, "{m}");
    }
    // 3,000 picks with repeats fall evenly over the ranks: each tenth expects 300 (a standard
    // deviation of 16); a sampler stuck in one region would leave tenths nearly empty.
    let mut tenths = [0u32; 10];
    for _ in 0..3 {
        let picks: Vec<String> = q(&mut c, &["ZRANDMEMBER", "big", "-1000"]);
        assert_eq!(picks.len(), 1000);
        for m in &picks {
            tenths[(number(m) * 10 / n) as usize] += 1;
        }
    }
    assert!(
        tenths.iter().all(|&t| (200..=400).contains(&t)),
        "picks per tenth of the ranks: {tenths:?}"
    );
    let one: String = q(&mut c, &["ZRANDMEMBER", "big"]);
    assert!(number(&one) < n);
    let (_, after) = rank_stats(&mut c);
    assert_eq!(after - before, 5, "every draw came through the index");
    // The index follows the writes: removed members are never drawn, added ones are.
    let _: i64 = q(&mut c, &["ZREMRANGEBYSCORE", "big", "0", "59999"]);
    let mut cmd = redis::cmd("ZADD");
    cmd.arg("big");
    for i in 0..100 {
        cmd.arg(-1).arg(format!("new{i}"));
    }
    let _: i64 = cmd.query(&mut c).unwrap();
    let mut new_drawn = 0;
    for _ in 0..20 {
        let picks: Vec<String> = q(&mut c, &["ZRANDMEMBER", "big", "-1000"]);
        for m in &picks {
            if m.starts_with("new") {
                new_drawn += 1;
            } else {
                assert!(number(m) >= 60_000, "{m} was removed");
            }
        }
    }
    // 20,000 draws from 10,100 members, 100 of them new: ~198 expected.
    assert!(
        new_drawn > 50,
        "the added members were drawn {new_drawn} times"
    );
}

/// A sorted set that grows at its end and shrinks at its front (a sliding window of
/// timestamps) keeps its index: an append past every member opens a bucket once the last is
/// full, an emptied bucket closes, so it keeps about one fence per 64 members. Before, the
/// appends piled into the last bucket, which outgrew its limit (8,192) and dropped the index:
/// the next rank query walked the whole set again.
#[test]
fn a_sliding_window_of_scores_keeps_its_rank_index() {
    const W: u64 = 10_000;
    let s = TestServer::start_with(&["--zset-rank-index-min-len", "500"]);
    let mut c = s.client();
    let mut rng = Lcg(5);
    let add = |c: &mut Connection, from: u64, to: u64| add_ranked(c, "w", from..to);
    add(&mut c, 0, W);
    assert_eq!(
        q::<Option<u64>>(&mut c, &["ZRANK", "w", &member(2500)]),
        Some(2500)
    );
    let (builds, answers) = rank_stats(&mut c);
    let bytes = info_field(&mut c, "stats", "zset_rank_index_bytes").unwrap();
    // 20,000 appended and as many gone from the front, 1,000 at a time.
    for step in 0..20u64 {
        let end = W + (step + 1) * 1000;
        add(&mut c, end - 1000, end);
        let first = end - W;
        let _: i64 = q(
            &mut c,
            &["ZREMRANGEBYSCORE", "w", "-inf", &format!("({first}")],
        );
        // The window is first..end: member i has rank i - first.
        for _ in 0..3 {
            let i = first + rng.below(W);
            let rank = Some(i - first);
            assert_eq!(q::<Option<u64>>(&mut c, &["ZRANK", "w", &member(i)]), rank);
        }
        let (a, b) = (first + rng.below(W), first + rng.below(W));
        let (a, b) = (a.min(b), a.max(b));
        let n: u64 = q(&mut c, &["ZCOUNT", "w", &a.to_string(), &b.to_string()]);
        assert_eq!(n, b - a + 1, "ZCOUNT {a} {b}");
    }
    assert_eq!(q::<u64>(&mut c, &["ZCARD", "w"]), W);
    let (b, a) = rank_stats(&mut c);
    assert_eq!(b, builds, "the index was kept through the window's moves");
    assert_eq!(a - answers, 80, "every query was answered through it");
    let now = info_field(&mut c, "stats", "zset_rank_index_bytes").unwrap();
    assert!(
        now > bytes / 2 && now < bytes * 2,
        "fences for the same number of members: {bytes} -> {now} bytes"
    );
}

/// New members that all join at one place (a leaderboard's new players at score 0) fill one
/// bucket of the index; the query that lands in a bucket grown past `rank-index-split-len`
/// splits it by one walk, so the index is kept and every later query there walks ~64
/// members. Before (and with the setting at 0), the bucket grew until it passed 8,192 and
/// dropped the index, which the next query built again by a walk of the whole set.
#[test]
fn joins_at_one_score_split_their_bucket_and_keep_the_index() {
    const N: u64 = 5_000;
    const JOINS: u64 = 20_000;
    for split_len in ["512", "0"] {
        let s = TestServer::start_with(&[
            "--zset-rank-index-min-len",
            "500",
            "--rank-index-split-len",
            split_len,
        ]);
        let mut c = s.client();
        let mut rng = Lcg(7);
        // Players at scores 1..=N, then joins at score 0: member j<i> sorts before every
        // player, so the joined ones hold ranks 0..joined in member order.
        add_ranked(&mut c, "lb", 1..N + 1);
        assert_eq!(
            q::<Option<u64>>(&mut c, &["ZRANK", "lb", &member(N)]),
            Some(N - 1)
        );
        let (builds, _) = rank_stats(&mut c);
        let join = |i: u64| format!("j{i:06}");
        for from in (0..JOINS).step_by(500) {
            let mut cmd = redis::cmd("ZADD");
            cmd.arg("lb");
            for i in from..from + 500 {
                cmd.arg(0).arg(join(i));
            }
            let _: i64 = cmd.query(&mut c).unwrap();
            let joined = from + 500;
            // A player who just joined asks for their rank, then anyone.
            for i in [joined - 1 - rng.below(100), rng.below(joined)] {
                assert_eq!(
                    q::<Option<u64>>(&mut c, &["ZRANK", "lb", &join(i)]),
                    Some(i)
                );
                let p = 1 + rng.below(N);
                let rank = Some(joined + p - 1);
                assert_eq!(q::<Option<u64>>(&mut c, &["ZRANK", "lb", &member(p)]), rank);
            }
        }
        let (b, _) = rank_stats(&mut c);
        let splits = info_field(&mut c, "stats", "zset_rank_index_splits").unwrap();
        if split_len == "0" {
            assert_eq!(splits, 0);
            assert!(b > builds, "without splits the bucket outgrew its limit");
        } else {
            // A bucket is split when a rank would walk more than 512 of its ties: the joins
            // at score 0 grow by 500 a round, so at least every other round.
            assert!(splits >= JOINS / 1024, "{splits} splits");
            assert_eq!(b, builds, "the index was kept through the joins");
        }
    }
}

/// ZRANK, ZREVRANK, ZCOUNT, ZLEXCOUNT and the range reads run on the I/O thread when they walk
/// little: a small set, a big one counted through its rank index (a bucket's walk), a short
/// range from either end or after a seek (a limit of a few hundred). What would walk far goes
/// to a worker, the same reply: the first query of a big set (it builds the index), a range
/// without a small limit, and every count of a big set without an index
/// (`zset-rank-index-min-len 0`), and all of them with `rtc-zset-reads no`. INFO's
/// `rtc_commands` counts those the I/O thread answered.
#[test]
fn counted_queries_run_on_the_io_thread_only_when_they_walk_little() {
    let s = TestServer::start_with(&["--zset-rank-index-min-len", "500"]);
    let mut c = s.client();
    add_ranked(&mut c, "big", 0..5_000);
    let _: i64 = q(&mut c, &["ZADD", "small", "1", "a", "2", "b", "3", "c"]);
    // Answered here and on the I/O thread (1) or on a worker (0), with its reply.
    let on_io_thread = |c: &mut Connection, args: &[&str], reply: Option<u64>| {
        let before = rtc_commands(c);
        assert_eq!(q::<Option<u64>>(c, args), reply, "{args:?}");
        rtc_commands(c) - before
    };
    assert_eq!(on_io_thread(&mut c, &["ZRANK", "small", "b"], Some(1)), 1);
    let (builds, _) = rank_stats(&mut c);
    let first = on_io_thread(&mut c, &["ZRANK", "big", &member(2500)], Some(2500));
    assert_eq!(first, 0, "the query that builds the index runs on a worker");
    assert_eq!(rank_stats(&mut c).0, builds + 1);
    let mut rng = Lcg(3);
    let mut here = 0;
    for _ in 0..25 {
        let i = rng.below(5_000);
        let (m, lo) = (member(i), i.to_string());
        here += on_io_thread(&mut c, &["ZRANK", "big", &m], Some(i));
        here += on_io_thread(&mut c, &["ZREVRANK", "big", &m], Some(4_999 - i));
        here += on_io_thread(&mut c, &["ZCOUNT", "big", &lo, "+inf"], Some(5_000 - i));
    }
    assert_eq!(here, 75, "counted through the index on the I/O thread");
    // Ranges: a leaderboard's top ten, ten from the middle through the index and short score
    // and lex ranges walk little; a whole range of a big set walks far.
    let range = |c: &mut Connection, args: &[&str], want: std::ops::Range<u64>, rev: bool| {
        let before = rtc_commands(c);
        let mut want: Vec<String> = want.map(member).collect();
        if rev {
            want.reverse();
        }
        assert_eq!(q::<Vec<String>>(c, args), want, "{args:?}");
        rtc_commands(c) - before
    };
    let cases: &[(&[&str], std::ops::Range<u64>, bool, u64)] = &[
        (&["ZREVRANGE", "big", "0", "9"], 4_990..5_000, true, 1),
        (&["ZRANGE", "big", "2500", "2509"], 2_500..2_510, false, 1),
        (&["ZRANGE", "big", "-10", "-1", "REV"], 0..10, true, 1),
        (
            &["ZRANGEBYSCORE", "big", "100", "+inf", "LIMIT", "0", "10"],
            100..110,
            false,
            1,
        ),
        (
            &["ZREVRANGEBYSCORE", "big", "(300", "-inf", "LIMIT", "5", "3"],
            292..295,
            true,
            1,
        ),
        (&["ZRANGE", "big", "0", "-1"], 0..5_000, false, 0),
        (
            &["ZRANGEBYSCORE", "big", "-inf", "+inf"],
            0..5_000,
            false,
            0,
        ),
        (
            &["ZRANGE", "big", "100", "(200", "BYSCORE"],
            100..200,
            false,
            0,
        ),
    ];
    for (args, want, rev, here) in cases {
        assert_eq!(range(&mut c, args, want.clone(), *rev), *here, "{args:?}");
    }
    // An excluded bound is sought past, not walked over its ties: 3,000 members at score 0,
    // then ten at scores 1..=10.
    let mut cmd = redis::cmd("ZADD");
    cmd.arg("ties");
    for i in 0..3_010u64 {
        cmd.arg(i.saturating_sub(2_999)).arg(member(i));
    }
    let _: i64 = cmd.query(&mut c).unwrap();
    let ties: &[(&[&str], std::ops::Range<u64>, bool)] = &[
        (
            &["ZRANGEBYSCORE", "ties", "(0", "+inf", "LIMIT", "0", "5"],
            3_000..3_005,
            false,
        ),
        (
            &["ZREVRANGEBYSCORE", "ties", "(1", "-inf", "LIMIT", "0", "3"],
            2_997..3_000,
            true,
        ),
        (
            &["ZRANGE", "ties", "(0", "3", "BYSCORE", "LIMIT", "0", "9"],
            3_000..3_003,
            false,
        ),
    ];
    for (args, want, rev) in ties {
        assert_eq!(range(&mut c, args, want.clone(), *rev), 1, "{args:?}");
    }
    // The switch: every one of them on a worker.
    let _: () = q(&mut c, &["CONFIG", "SET", "rtc-zset-reads", "no"]);
    assert_eq!(range(&mut c, cases[0].0, cases[0].1.clone(), true), 0);
    assert_eq!(on_io_thread(&mut c, &["ZRANK", "small", "b"], Some(1)), 0);
    let _: () = q(&mut c, &["CONFIG", "SET", "rtc-zset-reads", "yes"]);
    let _: () = q(&mut c, &["CONFIG", "SET", "zset-rank-index-min-len", "0"]);
    for i in [10u64, 2_500, 4_990] {
        let m = member(i);
        assert_eq!(on_io_thread(&mut c, &["ZRANK", "big", &m], Some(i)), 0);
        let lo = i.to_string();
        assert_eq!(
            on_io_thread(&mut c, &["ZCOUNT", "big", &lo, "+inf"], Some(5_000 - i)),
            0
        );
    }
    assert_eq!(
        on_io_thread(&mut c, &["ZCOUNT", "small", "2", "3"], Some(2)),
        1
    );
}

/// ZRANK and ZREVRANK take the member's score from the hot cache, as ZSCORE does, when it
/// holds the member: after a restart (nothing cached) the first query of a member reads it
/// from RocksDB and caches it (one fill), the next finds it (no fill); a write that moves or
/// removes the member is seen.
#[test]
fn ranks_find_a_cached_member_score_and_see_the_writes_that_change_it() {
    let mut s = TestServer::start();
    let mut c = s.client();
    add_ranked(&mut c, "big", 0..5_000);
    s.restart();
    let mut c = s.client();
    let fills = |c: &mut Connection| -> u64 { info_field(c, "stats", "cache_fills").unwrap() };
    let rank = |c: &mut Connection, cmd: &str, m: &str| q::<Option<u64>>(c, &[cmd, "big", m]);
    assert_eq!(rank(&mut c, "ZRANK", &member(10)), Some(10));
    let before = fills(&mut c);
    assert_eq!(rank(&mut c, "ZRANK", &member(200)), Some(200));
    assert_eq!(
        fills(&mut c),
        before + 1,
        "the first ZRANK of a member caches its score"
    );
    for _ in 0..3 {
        assert_eq!(rank(&mut c, "ZREVRANK", &member(200)), Some(4_799));
        assert_eq!(rank(&mut c, "ZRANK", &member(200)), Some(200));
    }
    assert_eq!(fills(&mut c), before + 1, "later ones find it");
    // Moved to the end, removed, added back at the front: each seen at once.
    let _: u64 = q(&mut c, &["ZADD", "big", "99999", &member(200)]);
    assert_eq!(rank(&mut c, "ZRANK", &member(200)), Some(4_999));
    assert_eq!(rank(&mut c, "ZRANK", &member(201)), Some(200));
    let _: u64 = q(&mut c, &["ZREM", "big", &member(200)]);
    for _ in 0..2 {
        assert_eq!(rank(&mut c, "ZRANK", &member(200)), None);
    }
    let _: u64 = q(&mut c, &["ZADD", "big", "-1", &member(200)]);
    assert_eq!(rank(&mut c, "ZRANK", &member(200)), Some(0));
    assert_eq!(rank(&mut c, "ZREVRANK", &member(200)), Some(4_999));
    assert_eq!(rank(&mut c, "ZRANK", "absent"), None);
    // Open ends are counted without the index's walk; excluded infinities still walk.
    let _: u64 = q(&mut c, &["ZADD", "big", "+inf", "top", "-inf", "bottom"]);
    for (min, max, want) in [
        ("-inf", "+inf", 5_002),
        ("(-inf", "+inf", 5_001),
        ("-inf", "(+inf", 5_001),
        ("(-inf", "(+inf", 5_000),
        ("4990", "+inf", 11),
        ("-inf", "(10", 12),
    ] {
        assert_eq!(
            q::<u64>(&mut c, &["ZCOUNT", "big", min, max]),
            want,
            "ZCOUNT {min} {max}"
        );
    }
    let top: Vec<String> = q(&mut c, &["ZRANGEBYSCORE", "big", "4998", "+inf"]);
    assert_eq!(top, [member(4_998), member(4_999), "top".into()]);
    let low: Vec<String> = q(&mut c, &["ZREVRANGEBYSCORE", "big", "(1", "-inf"]);
    assert_eq!(low, [member(0), member(200), "bottom".into()]);
}

/// After a restart nothing is indexed; readers that all need the index of one big set at
/// once (a leaderboard queried under load) build it once: the first builds, the others wait
/// for that build instead of each walking the whole set.
#[test]
fn readers_that_need_one_index_at_once_build_it_once() {
    const N: u64 = 200_000;
    let mut s = TestServer::start();
    let mut c = s.client();
    add_ranked(&mut c, "big", 0..N);
    s.restart();
    let readers = 8;
    let start = std::sync::Arc::new(std::sync::Barrier::new(readers));
    let threads: Vec<_> = (0..readers as u64)
        .map(|r| {
            let mut c = s.client();
            let start = start.clone();
            std::thread::spawn(move || {
                let i = r * (N / 8) + 7;
                start.wait();
                let rank: Option<u64> = q(&mut c, &["ZRANK", "big", &member(i)]);
                assert_eq!(rank, Some(i), "ZRANK {}", member(i));
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let (builds, answers) = rank_stats(&mut s.client());
    assert_eq!(builds, 1, "one build for {readers} readers at once");
    assert_eq!(answers, readers as u64);
}

/// An index that grew by appends (new buckets past the end) and is then dropped by an edit
/// (a bucket grown past 8,192 by inserts at one place, splits off) leaves the indexes' byte
/// count where it was: the server stays up and the next query builds the index again. (The
/// count once went below zero here: an overflow panic in the commit.)
#[test]
fn an_index_grown_by_appends_then_dropped_leaves_the_server_counting() {
    let s = TestServer::start_with(&["--rank-index-split-len", "0"]);
    let mut c = s.client();
    let add = |c: &mut Connection, members: &mut dyn Iterator<Item = (String, String)>| {
        let mut cmd = redis::cmd("ZADD");
        cmd.arg("w");
        for (score, m) in members {
            cmd.arg(score).arg(m);
        }
        let _: u64 = cmd.query(c).unwrap();
    };
    add(
        &mut c,
        &mut (0..3_000u64).map(|i| (i.to_string(), member(i))),
    );
    assert_eq!(
        q::<Option<u64>>(&mut c, &["ZRANK", "w", &member(1_500)]),
        Some(1_500)
    );
    for lo in (3_000..13_000u64).step_by(1_000) {
        add(
            &mut c,
            &mut (lo..lo + 1_000).map(|i| (i.to_string(), member(i))),
        );
    }
    for lo in (0..9_000u64).step_by(1_000) {
        add(
            &mut c,
            &mut (lo..lo + 1_000).map(|i| ("5.5".into(), format!("x{i:05}"))),
        );
    }
    assert_eq!(
        q::<Option<u64>>(&mut c, &["ZRANK", "w", &member(1_500)]),
        Some(10_500)
    );
    assert_eq!(q::<String>(&mut c, &["PING"]), "PONG");
    let (builds, _) = rank_stats(&mut c);
    assert_eq!(
        builds, 2,
        "dropped by the inserts at one place, built again"
    );
}

/// A top ten (ZREVRANGE 0 9, ZREVRANGEBYSCORE +inf -inf LIMIT 0 10) and a bottom five of an
/// indexed set come from the entries its rank index keeps at both ends (counted as answers
/// through the index), and stay exact through writes at the top: new leaders, leaders
/// removed, scores raised.
#[test]
fn the_top_ten_is_read_from_the_index_ends_and_follows_the_writes() {
    let s = TestServer::start();
    let mut c = s.client();
    add_ranked(&mut c, "lb", 0..5_000);
    let mut model: BTreeMap<String, i64> = (0..5_000).map(|i| (member(i), i as i64)).collect();
    assert_eq!(
        q::<Option<u64>>(&mut c, &["ZRANK", "lb", &member(7)]),
        Some(7)
    );
    let mut rng = Lcg(11);
    for round in 0..200 {
        let m = member(4_900 + rng.below(200));
        match rng.below(3) {
            0 => {
                let score = 4_900 + rng.below(300) as i64;
                let _: u64 = q(&mut c, &["ZADD", "lb", &score.to_string(), &m]);
                model.insert(m, score);
            }
            1 => {
                let _: u64 = q(&mut c, &["ZREM", "lb", &m]);
                model.remove(&m);
            }
            _ if model.contains_key(&m) => {
                let _: f64 = q(&mut c, &["ZINCRBY", "lb", "3", &m]);
                *model.get_mut(&m).unwrap() += 3;
            }
            _ => {}
        }
        let order = ordered(&model);
        let answers = rank_stats(&mut c).1;
        let top_ten: Vec<String> = order
            .iter()
            .rev()
            .take(10)
            .map(|(_, m)| m.clone())
            .collect();
        let top: Vec<String> = q(&mut c, &["ZREVRANGE", "lb", "0", "9"]);
        assert_eq!(top, top_ten, "round {round}: ZREVRANGE 0 9");
        let bottom: Vec<(String, f64)> = q(&mut c, &["ZRANGE", "lb", "0", "4", "WITHSCORES"]);
        let want: Vec<(String, f64)> = order
            .iter()
            .take(5)
            .map(|(s, m)| (m.clone(), *s as f64))
            .collect();
        assert_eq!(bottom, want, "round {round}: ZRANGE 0 4");
        // Score ranges that start at an end: the top ten by score, a band under the top, the
        // lowest scores past an offset.
        let got: Vec<String> = q(
            &mut c,
            &["ZREVRANGEBYSCORE", "lb", "+inf", "-inf", "LIMIT", "0", "10"],
        );
        assert_eq!(
            got, top_ten,
            "round {round}: ZREVRANGEBYSCORE +inf -inf LIMIT 0 10"
        );
        let got: Vec<String> = q(
            &mut c,
            &[
                "ZRANGE", "lb", "+inf", "(5000", "BYSCORE", "REV", "LIMIT", "2", "6",
            ],
        );
        let want: Vec<String> = order
            .iter()
            .rev()
            .filter(|(s, _)| *s > 5000)
            .skip(2)
            .take(6)
            .map(|(_, m)| m.clone())
            .collect();
        assert_eq!(
            got, want,
            "round {round}: ZRANGE +inf (5000 BYSCORE REV LIMIT 2 6"
        );
        let got: Vec<(String, f64)> = q(
            &mut c,
            &[
                "ZRANGEBYSCORE",
                "lb",
                "-inf",
                "3",
                "WITHSCORES",
                "LIMIT",
                "1",
                "10",
            ],
        );
        let want: Vec<(String, f64)> = order
            .iter()
            .filter(|(s, _)| *s <= 3)
            .skip(1)
            .map(|(s, m)| (m.clone(), *s as f64))
            .collect();
        assert_eq!(got, want, "round {round}: ZRANGEBYSCORE -inf 3 LIMIT 1 10");
        assert_eq!(
            rank_stats(&mut c).1,
            answers + 5,
            "round {round}: all through the index"
        );
    }
}

/// With the members' scores in the index (`zset-rank-index-scores`, the default), ZCOUNT's
/// bounds and the rank of a member whose score no other member of its bucket has are placed
/// from memory (INFO `zset_rank_index_placed`, one per bound); a member that shares its score
/// is counted by a walk of the ties. Switching the scores off drops the indexes: the next
/// query builds one without them, smaller, and the same answers come by walks in a bucket.
#[test]
fn counts_and_ranks_are_placed_by_the_scores_in_the_index() {
    const N: u64 = 5_000;
    let s = TestServer::start_with(&["--zset-rank-index-min-len", "500"]);
    let mut c = s.client();
    add_ranked(&mut c, "lb", 0..N);
    // Ties at score 100: m00100 and t1..t3, ordered by member.
    let _: i64 = q(
        &mut c,
        &["ZADD", "lb", "100", "t1", "100", "t2", "100", "t3"],
    );
    let placed = |c: &mut Connection| info_field(c, "stats", "zset_rank_index_placed").unwrap();
    let queries = |c: &mut Connection| {
        assert_eq!(q::<u64>(c, &["ZCOUNT", "lb", "1000", "(2000"]), 1000);
        assert_eq!(q::<u64>(c, &["ZCOUNT", "lb", "(99", "100"]), 4);
        assert_eq!(
            q::<Option<u64>>(c, &["ZRANK", "lb", &member(4000)]),
            Some(4003)
        );
        assert_eq!(
            q::<Option<u64>>(c, &["ZREVRANK", "lb", &member(10)]),
            Some(N + 2 - 10)
        );
        assert_eq!(q::<Option<u64>>(c, &["ZRANK", "lb", "t2"]), Some(102));
        let mid: Vec<String> = q(c, &["ZRANGE", "lb", "2503", "2505"]);
        assert_eq!(mid, [member(2500), member(2501), member(2502)]);
    };
    queries(&mut c);
    let (builds, _) = rank_stats(&mut c);
    assert_eq!(builds, 1);
    let with_scores = info_field(&mut c, "stats", "zset_rank_index_bytes").unwrap();
    let before = placed(&mut c);
    queries(&mut c);
    // Four ZCOUNT bounds and two ranks of members alone at their score; t2's rank walks.
    assert_eq!(placed(&mut c) - before, 6);

    let _: () = q(&mut c, &["CONFIG", "SET", "zset-rank-index-scores", "no"]);
    assert_eq!(info_field(&mut c, "stats", "zset_rank_indexes"), Some(0));
    let before = placed(&mut c);
    queries(&mut c);
    assert_eq!(
        placed(&mut c),
        before,
        "no scores: every place is walked to"
    );
    assert_eq!(rank_stats(&mut c).0, builds + 1);
    let without = info_field(&mut c, "stats", "zset_rank_index_bytes").unwrap();
    assert!(
        with_scores >= without + 8 * (N + 3),
        "8 bytes a member: {with_scores} against {without}"
    );
}
