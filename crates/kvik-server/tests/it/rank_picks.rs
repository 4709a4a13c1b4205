//! Random picks of big sets and hashes through a rank index of their member order
//! (`set-rank-index`, `cmd::ranked`): SRANDMEMBER, HRANDFIELD and SPOP of a collection too big
//! for a deck (over 65,536 members) draw uniform random ranks, each a seek and a short walk.
//! The index is only right if every write that adds or removes a member counts it in the
//! right bucket: a miscount shows as picks of removed members, added members drawn at the
//! wrong rate, or (a total that disagrees with the length) an index built again, which INFO
//! counts.

use crate::common::*;
use redis::Connection;

/// Past the largest collection dealt into a deck (65,536), so picks come from the index.
const N: u64 = 70_000;

fn rank_stats(c: &mut Connection) -> (u64, u64) {
    (
        info_field(c, "stats", "zset_rank_index_builds").unwrap(),
        info_field(c, "stats", "zset_rank_index_answers").unwrap(),
    )
}

/// Set `s` of members m00000..m69999 and hash `h` of fields m00000.. with values v<n>.
fn load(c: &mut Connection) {
    for chunk in 0..N / 1000 {
        let (mut sadd, mut hset) = (redis::cmd("SADD"), redis::cmd("HSET"));
        sadd.arg("s");
        hset.arg("h");
        for i in chunk * 1000..(chunk + 1) * 1000 {
            sadd.arg(format!("m{i:05}"));
            hset.arg(format!("m{i:05}")).arg(format!("v{i}"));
        }
        let _: i64 = sadd.query(c).unwrap();
        let _: i64 = hset.query(c).unwrap();
    }
}

fn number(m: &str) -> u64 {
    m[1..].parse().unwrap()
}

/// 3,000 picks with repeats (`cmd` of `key` with count -1000, three times): how many fell in
/// each tenth of m00000..m69999, and the members outside that range.
fn tenths(c: &mut Connection, cmd: &str, key: &str) -> ([u32; 10], Vec<String>) {
    let (mut t, mut other) = ([0u32; 10], Vec::new());
    for _ in 0..3 {
        let picks: Vec<String> = q(c, &[cmd, key, "-1000"]);
        assert_eq!(picks.len(), 1000);
        for m in picks {
            match m.strip_prefix('m').and_then(|n| n.parse::<u64>().ok()) {
                Some(n) if n < N => t[(n * 10 / N) as usize] += 1,
                _ => other.push(m),
            }
        }
    }
    (t, other)
}

#[test]
fn random_members_of_big_sets_and_hashes_are_drawn_by_rank_uniformly() {
    drawn_by_rank_uniformly("yes");
}

#[test]
fn random_members_are_drawn_uniformly_without_the_members_prefixes_in_the_index() {
    drawn_by_rank_uniformly("no");
}

/// Picks of a big set and hash through their rank indexes, with the members' prefixes kept
/// in them (`set-rank-index-prefixes`: each pick sought at its member) or not (a walk from its
/// bucket's fence): uniform, from the collection, and kept right by the writes.
fn drawn_by_rank_uniformly(prefixes: &str) {
    let s = TestServer::start_with(&["--set-rank-index-prefixes", prefixes]);
    let mut c = s.client();
    load(&mut c);
    let (builds, answers) = rank_stats(&mut c);

    // Distinct picks, and one pick.
    let picks: Vec<String> = q(&mut c, &["SRANDMEMBER", "s", "10"]);
    let distinct: std::collections::BTreeSet<&String> = picks.iter().collect();
    assert_eq!(distinct.len(), 10, "{picks:?}");
    assert!(picks.iter().all(|m| number(m) < N), "{picks:?}");
    let one: String = q(&mut c, &["SRANDMEMBER", "s"]);
    assert!(number(&one) < N);
    let pairs: Vec<(String, String)> = q(&mut c, &["HRANDFIELD", "h", "10", "WITHVALUES"]);
    assert_eq!(pairs.len(), 10);
    for (f, v) in &pairs {
        assert_eq!(*v, format!("v{}", number(f)), "{f}");
    }
    let one: String = q(&mut c, &["HRANDFIELD", "h"]);
    assert!(number(&one) < N);
    // Past 1,024 picks, up to a 64th of the set (1,093): sorted by rank, neighbours reached
    // by steps from the last pick, the others sought. ~15 pairs of adjacent ranks are
    // expected among them: a step too many or too few would draw one member twice.
    let picks: Vec<String> = q(&mut c, &["SRANDMEMBER", "s", "1090"]);
    let distinct: std::collections::BTreeSet<&String> = picks.iter().collect();
    assert_eq!(distinct.len(), 1090);
    assert!(picks.iter().all(|m| number(m) < N));
    // Picks with repeats fall evenly over the ranks: each tenth expects 300 (a standard
    // deviation of 16); the walks they replace favour members under small branches.
    for (cmd, key) in [("SRANDMEMBER", "s"), ("HRANDFIELD", "h")] {
        let (t, other) = tenths(&mut c, cmd, key);
        assert!(other.is_empty(), "{other:?}");
        assert!(
            t.iter().all(|&n| (200..=400).contains(&n)),
            "{cmd}: picks per tenth of the ranks: {t:?}"
        );
    }
    let (b, a) = rank_stats(&mut c);
    assert_eq!(b - builds, 2, "one index per collection");
    assert_eq!(a - answers, 11, "every draw came through an index");
    // 8 bytes a member with the prefixes (after the `m` every member starts with).
    let bytes = info_field(&mut c, "stats", "zset_rank_index_bytes").unwrap();
    assert_eq!(bytes > 2 * 8 * N, prefixes == "yes", "{bytes} bytes");
    // More picks than that take one pass per million picks; drawn uniformly too.
    let picks: Vec<String> = q(&mut c, &["SRANDMEMBER", "s", "-1100000"]);
    assert_eq!(picks.len(), 1_100_000);
    let mut t = [0u32; 10];
    for m in &picks {
        t[(number(m) * 10 / N) as usize] += 1;
    }
    assert!(
        t.iter().all(|&n| (105_000..=115_000).contains(&n)),
        "passes: picks per tenth {t:?}"
    );
    assert_eq!(rank_stats(&mut c).1 - answers, 11);

    // The writes count their members: 2,000 removed from the start, 2,000 added past the end
    // (all into the last bucket), overwrites and repeats that add nothing, SPOP.
    for chunk in 0..2 {
        let (mut srem, mut hdel, mut sadd, mut hset) = (
            redis::cmd("SREM"),
            redis::cmd("HDEL"),
            redis::cmd("SADD"),
            redis::cmd("HSET"),
        );
        srem.arg("s");
        hdel.arg("h");
        sadd.arg("s").arg("m50000");
        hset.arg("h").arg("m50000").arg("v50000");
        for i in chunk * 1000..(chunk + 1) * 1000 {
            srem.arg(format!("m{i:05}")).arg("absent");
            hdel.arg(format!("m{i:05}"));
            sadd.arg(format!("new{i}"));
            hset.arg(format!("new{i}")).arg(format!("w{i}"));
        }
        assert_eq!(srem.query::<i64>(&mut c).unwrap(), 1000);
        assert_eq!(hdel.query::<i64>(&mut c).unwrap(), 1000);
        assert_eq!(sadd.query::<i64>(&mut c).unwrap(), 1000);
        assert_eq!(hset.query::<i64>(&mut c).unwrap(), 1000);
    }
    let popped: Vec<String> = q(&mut c, &["SPOP", "s", "3"]);
    assert_eq!(popped.len(), 3);
    for m in &popped {
        assert_eq!(q::<i64>(&mut c, &["SISMEMBER", "s", m]), 0, "{m} popped");
    }
    assert_eq!(q::<u64>(&mut c, &["SCARD", "s"]), N - 3);
    let (b, a) = rank_stats(&mut c);
    assert_eq!(
        b - builds,
        2,
        "the writes kept the indexes: none built again"
    );
    assert_eq!(a - answers, 12, "SPOP drew through the index");

    // Removed members are never drawn; added ones at their share, ~571 of 20,000 (a miscounted
    // last bucket would draw them far more or less often).
    for (cmd, key) in [("SRANDMEMBER", "s"), ("HRANDFIELD", "h")] {
        let mut new = 0;
        for _ in 0..20 {
            let picks: Vec<String> = q(&mut c, &[cmd, key, "-1000"]);
            for m in &picks {
                if m.starts_with("new") {
                    new += 1;
                } else {
                    assert!(number(m) >= 2000, "{cmd}: {m} was removed");
                    assert!(key != "s" || !popped.contains(m), "{m} was popped");
                }
            }
        }
        assert!(
            (400..=760).contains(&new),
            "{cmd}: the added members drawn {new} times"
        );
    }
    let (b, _) = rank_stats(&mut c);
    assert_eq!(b - builds, 2);
}

#[test]
fn picks_without_an_index_still_come_from_the_collection() {
    let s = TestServer::start_with(&["--set-rank-index", "no"]);
    let mut c = s.client();
    load(&mut c);
    let (_, answers) = rank_stats(&mut c);
    for (cmd, key) in [("SRANDMEMBER", "s"), ("HRANDFIELD", "h")] {
        let (t, other) = tenths(&mut c, cmd, key);
        assert!(other.is_empty(), "{other:?}");
        assert_eq!(t.iter().sum::<u32>(), 3000);
    }
    let popped: Vec<String> = q(&mut c, &["SPOP", "s", "2"]);
    assert_eq!(popped.len(), 2);
    assert_eq!(q::<u64>(&mut c, &["SCARD", "s"]), N - 2);
    assert_eq!(
        rank_stats(&mut c).1,
        answers,
        "switched off: no index answered"
    );

    // Switched on at run time; a hash with a field TTL is not drawn through an index (which
    // fields count changes with the clock).
    let _: () = q(&mut c, &["CONFIG", "SET", "set-rank-index", "yes"]);
    let _: Vec<i64> = q(&mut c, &["HEXPIRE", "h", "100000", "FIELDS", "1", "m00007"]);
    let _: Vec<String> = q(&mut c, &["HRANDFIELD", "h", "-100"]);
    assert_eq!(rank_stats(&mut c).1, answers);
    let _: Vec<String> = q(&mut c, &["SRANDMEMBER", "s", "-100"]);
    assert_eq!(rank_stats(&mut c).1, answers + 1);
}
