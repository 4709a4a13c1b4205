//! Sets and sorted sets in the hot cache (`cache-sets`): a write leaves the collection's meta
//! record and the members it wrote cached, and the next write takes the length and each
//! member's prior state (a sorted set's score) from there instead of RocksDB. A cached member
//! that is stale would show as a wrong reply (SADD's count, ZINCRBY's score) or a wrong
//! length, so writers on several connections are checked reply by reply against a model per
//! key, through the writes that keep the cache (SADD SREM SPOP ZADD ZINCRBY ZREM ZPOPMIN) and
//! those that drop it (SMOVE, SUNIONSTORE, ZUNIONSTORE, RENAME, DEL, MULTI/EXEC, scripts),
//! with member entries evicted all the time and not at all. The member reads (SISMEMBER,
//! SMISMEMBER, ZSCORE, ZMSCORE, SCARD, ZCARD) answer from the same entries on the I/O thread:
//! the same replies as without the cache, and never a state older than the last write
//! acknowledged before the read began.

use crate::common::*;
use redis::{Connection, Value};
use std::collections::{BTreeMap, BTreeSet};

/// The members the writers use.
const MEMBERS: u64 = 24;

fn member_names() -> Vec<String> {
    (0..MEMBERS).map(|i| format!("m{i}")).collect()
}

/// SMISMEMBER of every member name: the set's members among them.
fn smismember_all(c: &mut Connection, key: &str) -> BTreeSet<String> {
    let names = member_names();
    let found: Vec<i64> = redis::cmd("SMISMEMBER")
        .arg(key)
        .arg(&names)
        .query(c)
        .unwrap();
    names
        .into_iter()
        .zip(found)
        .filter_map(|(n, f)| (f == 1).then_some(n))
        .collect()
}

/// ZMSCORE of every member name: the sorted set's members among them, with their scores.
fn zmscore_all(c: &mut Connection, key: &str) -> BTreeMap<String, i64> {
    let names = member_names();
    let scores: Vec<Option<f64>> = redis::cmd("ZMSCORE").arg(key).arg(&names).query(c).unwrap();
    names
        .into_iter()
        .zip(scores)
        .filter_map(|(n, s)| Some((n, s? as i64)))
        .collect()
}

/// One writer's keys (set `s`, sorted set `z`, and `o`, the other end of SMOVE) and their
/// expected contents.
struct Model {
    s: String,
    z: String,
    o: String,
    set: BTreeSet<String>,
    zset: BTreeMap<String, i64>,
    other: BTreeSet<String>,
}

impl Model {
    fn new(k: usize) -> Model {
        Model {
            s: format!("s{k}"),
            z: format!("z{k}"),
            o: format!("o{k}"),
            set: BTreeSet::new(),
            zset: BTreeMap::new(),
            other: BTreeSet::new(),
        }
    }

    /// The sorted set in ZRANGE order: by score, then by member.
    fn ranked(&self) -> Vec<(String, i64)> {
        let mut items: Vec<(String, i64)> =
            self.zset.iter().map(|(m, s)| (m.clone(), *s)).collect();
        items.sort_by(|a, b| a.1.cmp(&b.1).then(a.0.cmp(&b.0)));
        items
    }

    /// Checks the keys against the model: the lengths (answered from the cache's meta entry
    /// when it holds one) and the members (read from RocksDB).
    fn check(&self, c: &mut Connection, step: &str) {
        assert_eq!(
            q::<usize>(c, &["SCARD", &self.s]),
            self.set.len(),
            "SCARD after {step}"
        );
        assert_eq!(
            q::<usize>(c, &["ZCARD", &self.z]),
            self.zset.len(),
            "ZCARD after {step}"
        );
        assert_eq!(
            q::<usize>(c, &["SCARD", &self.o]),
            self.other.len(),
            "SCARD o after {step}"
        );
        let members: BTreeSet<String> = q(c, &["SMEMBERS", &self.s]);
        assert_eq!(members, self.set, "SMEMBERS after {step}");
        let ranked: Vec<(String, i64)> = q(c, &["ZRANGE", &self.z, "0", "-1", "WITHSCORES"]);
        assert_eq!(ranked, self.ranked(), "ZRANGE after {step}");
        // The member reads, answered from the cached members where the cache holds them.
        assert_eq!(
            smismember_all(c, &self.s),
            self.set,
            "SMISMEMBER after {step}"
        );
        assert_eq!(zmscore_all(c, &self.z), self.zset, "ZMSCORE after {step}");
        let is = q::<i64>(c, &["SISMEMBER", &self.o, "m3"]);
        assert_eq!(
            is,
            i64::from(self.other.contains("m3")),
            "SISMEMBER after {step}"
        );
        let score: Option<f64> = q(c, &["ZSCORE", &self.z, "m5"]);
        assert_eq!(
            score.map(|s| s as i64),
            self.zset.get("m5").copied(),
            "ZSCORE after {step}"
        );
    }
}

/// Runs `steps` random writes of one writer's keys, each reply checked against the model,
/// the keys checked whole every few steps.
fn run_writer(c: &mut Connection, k: usize, seed: u64, steps: usize) {
    let mut m = Model::new(k);
    let mut rng = Lcg(seed);
    for step in 0..steps {
        let a = format!("m{}", rng.below(MEMBERS));
        let b = format!("m{}", rng.below(MEMBERS));
        let n = rng.below(9) as i64 - 4;
        let label = format!("step {step} of writer {k}");
        match rng.below(16) {
            0..=2 => {
                let want = [&a, &b]
                    .iter()
                    .filter(|x| m.set.insert((**x).clone()))
                    .count();
                assert_eq!(q::<usize>(c, &["SADD", &m.s, &a, &b]), want, "SADD {label}");
            }
            3 => {
                let want = [&a, &b].iter().filter(|x| m.set.remove(**x)).count();
                assert_eq!(q::<usize>(c, &["SREM", &m.s, &a, &b]), want, "SREM {label}");
            }
            4 => match q::<Option<String>>(c, &["SPOP", &m.s]) {
                Some(got) => assert!(m.set.remove(&got), "SPOP {label}: {got} not a member"),
                None => assert!(m.set.is_empty(), "SPOP {label}: nil from a set"),
            },
            5 => {
                // Out of the set and back: both ends' meta records are written without the
                // cache's help (their entries are dropped).
                let (src, dst, from_s) = if rng.below(2) == 0 {
                    (m.s.clone(), m.o.clone(), true)
                } else {
                    (m.o.clone(), m.s.clone(), false)
                };
                let (from, to) = if from_s {
                    (&mut m.set, &mut m.other)
                } else {
                    (&mut m.other, &mut m.set)
                };
                let moved = from.remove(&a);
                if moved {
                    to.insert(a.clone());
                }
                assert_eq!(
                    q::<i64>(c, &["SMOVE", &src, &dst, &a]),
                    i64::from(moved),
                    "SMOVE {label}"
                );
            }
            6 => {
                m.set.extend(m.other.iter().cloned());
                let want = m.set.len();
                assert_eq!(
                    q::<usize>(c, &["SUNIONSTORE", &m.s, &m.s, &m.o]),
                    want,
                    "SUNIONSTORE {label}"
                );
            }
            7..=8 => {
                let new = m.zset.insert(a.clone(), n).is_none();
                assert_eq!(
                    q::<i64>(c, &["ZADD", &m.z, &n.to_string(), &a]),
                    i64::from(new),
                    "ZADD {label}"
                );
            }
            9..=10 => {
                let score = m.zset.get(&a).copied().unwrap_or(0) + n;
                m.zset.insert(a.clone(), score);
                let got: f64 = q(c, &["ZINCRBY", &m.z, &n.to_string(), &a]);
                assert_eq!(got, score as f64, "ZINCRBY {label}");
            }
            11 => {
                let want = usize::from(m.zset.remove(&a).is_some());
                assert_eq!(q::<usize>(c, &["ZREM", &m.z, &a]), want, "ZREM {label}");
            }
            12 => {
                let want: Vec<String> = m
                    .ranked()
                    .first()
                    .map_or(Vec::new(), |(x, s)| vec![x.clone(), s.to_string()]);
                if let Some((x, _)) = m.ranked().first() {
                    m.zset.remove(x);
                }
                assert_eq!(
                    q::<Vec<String>>(c, &["ZPOPMIN", &m.z]),
                    want,
                    "ZPOPMIN {label}"
                );
            }
            13 => {
                // A whole rewrite (a new version of the key), then a rename there and back.
                let want = m.zset.len();
                assert_eq!(
                    q::<usize>(c, &["ZUNIONSTORE", &m.z, "1", &m.z]),
                    want,
                    "ZUNIONSTORE {label}"
                );
                if !m.set.is_empty() {
                    let tmp = format!("t{k}");
                    q::<String>(c, &["RENAME", &m.s, &tmp]);
                    q::<String>(c, &["RENAME", &tmp, &m.s]);
                }
            }
            14 => {
                // A transaction and a script write the same keys.
                let score = m.zset.get(&b).copied().unwrap_or(0) + n;
                m.zset.insert(b.clone(), score);
                let added = m.set.insert(a.clone());
                let mut pipe = redis::pipe();
                pipe.atomic()
                    .cmd("SADD")
                    .arg(&m.s)
                    .arg(&a)
                    .cmd("ZINCRBY")
                    .arg(&m.z)
                    .arg(n)
                    .arg(&b);
                let (got_added, got_score): (i64, f64) = pipe.query(c).unwrap();
                assert_eq!(
                    (got_added, got_score),
                    (i64::from(added), score as f64),
                    "EXEC {label}"
                );
                let removed = m.set.remove(&b);
                let script = "return redis.call('SREM', KEYS[1], ARGV[1])";
                assert_eq!(
                    q::<i64>(c, &["EVAL", script, "1", &m.s, &b]),
                    i64::from(removed),
                    "EVAL {label}"
                );
            }
            _ => {
                if rng.below(4) == 0 {
                    m.set.clear();
                    m.zset.clear();
                    q::<i64>(c, &["DEL", &m.s, &m.z]);
                }
            }
        }
        if step % 16 == 15 {
            m.check(c, &label);
        }
    }
    m.check(c, "the last step");
}

fn writers_agree_with_the_model(server_args: &[&str]) -> TestServer {
    let s = TestServer::start_with(server_args);
    let threads: Vec<_> = (0..3)
        .map(|k| {
            let mut c = s.client();
            std::thread::spawn(move || run_writer(&mut c, k, 7 + k as u64, 1500))
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    s
}

#[test]
fn set_writes_through_the_cache_agree_with_a_model() {
    let s = writers_agree_with_the_model(&[]);
    let mut c = s.client();
    // The feature was in use: the writes left the sets' meta cached, which SCARD finds.
    q::<i64>(&mut c, &["SADD", "fresh", "a"]);
    let hits = stat(&mut c, "cache_hits");
    assert_eq!(q::<i64>(&mut c, &["SCARD", "fresh"]), 1);
    assert_eq!(
        stat(&mut c, "cache_hits"),
        hits + 1,
        "the set's meta cached by SADD"
    );
    assert_eq!(q::<String>(&mut c, &["TYPE", "fresh"]), "set");
    q::<i64>(&mut c, &["ZADD", "zfresh", "1", "a"]);
    assert_eq!(q::<String>(&mut c, &["TYPE", "zfresh"]), "zset");
    assert!(err(&mut c, &["HGET", "fresh", "a"]).starts_with("WRONGTYPE"));
    assert!(err(&mut c, &["GET", "zfresh"]).starts_with("WRONGTYPE"));
    // Switched off, the entries go and writes leave none.
    q::<String>(&mut c, &["CONFIG", "SET", "cache-sets", "no"]);
    q::<i64>(&mut c, &["SADD", "fresh", "b"]);
    let hits = stat(&mut c, "cache_hits");
    assert_eq!(q::<i64>(&mut c, &["SCARD", "fresh"]), 2);
    assert_eq!(
        stat(&mut c, "cache_hits"),
        hits,
        "no set cached with cache-sets no"
    );
}

#[test]
fn set_writes_agree_with_a_model_while_members_are_evicted() {
    // A cache of a few kilobytes per shard: members and meta entries come and go, so writers
    // meet every mix of cached and uncached state.
    let s = writers_agree_with_the_model(&["--cache-maxmemory", "96kb"]);
    let mut c = s.client();
    assert!(
        stat(&mut c, "cache_evictions") > 0,
        "the cache was too big to evict"
    );
}

#[test]
fn set_writes_agree_with_a_model_with_the_cache_off() {
    writers_agree_with_the_model(&["--cache-sets", "no"]);
}

/// The reply to `cmd`, an error reply as its message.
fn reply(c: &mut Connection, cmd: &[&str]) -> Value {
    command(cmd)
        .query::<Value>(c)
        .unwrap_or_else(|e| Value::SimpleString(format!("error: {e}")))
}

/// The member reads under test, over `key`.
fn member_reads(key: &str) -> Vec<Vec<&str>> {
    vec![
        vec!["SISMEMBER", key, "a"],
        vec!["SISMEMBER", key, "nope"],
        vec!["SMISMEMBER", key, "a", "nope", "b", "a"],
        vec!["SCARD", key],
        vec!["ZSCORE", key, "a"],
        vec!["ZSCORE", key, "nope"],
        vec!["ZMSCORE", key, "b", "nope", "a"],
        vec!["ZCARD", key],
    ]
}

#[test]
fn member_reads_are_served_from_the_cache_with_the_same_replies() {
    let s = TestServer::start();
    let mut c = s.client();
    q::<i64>(&mut c, &["SADD", "set", "a", "b", "c"]);
    q::<i64>(&mut c, &["ZADD", "zset", "1.5", "a", "-2", "b", "inf", "c"]);
    q::<String>(&mut c, &["SET", "str", "v"]);
    let keys = ["set", "zset", "str", "missing"];
    // The replies with the cache off; then on (cold), a first round fills the sets' meta and
    // the members asked for (and notes the missing key absent), and a second is all hits, on
    // the I/O thread.
    q::<String>(&mut c, &["CONFIG", "SET", "cache-enabled", "no"]);
    let want: Vec<Value> = keys
        .iter()
        .flat_map(|k| member_reads(k))
        .map(|cmd| reply(&mut c, &cmd))
        .collect();
    assert_eq!(want[0], Value::Int(1));
    let scores = ["-2", "", "1.5"].map(|v| match v {
        "" => Value::Nil,
        v => Value::BulkString(v.as_bytes().to_vec()),
    });
    assert_eq!(want[8 + 6], Value::Array(scores.to_vec()));
    q::<String>(&mut c, &["CONFIG", "SET", "cache-enabled", "yes"]);
    q::<String>(&mut c, &["GET", "str"]); // cached again (enabling starts cold)
    for round in 0..2 {
        for (i, key) in keys.iter().enumerate() {
            let (hits, rtc) = (stat(&mut c, "cache_hits"), stat(&mut c, "rtc_commands"));
            let cmds = member_reads(key);
            let got: Vec<Value> = cmds.iter().map(|cmd| reply(&mut c, cmd)).collect();
            assert_eq!(
                got,
                want[i * cmds.len()..(i + 1) * cmds.len()],
                "{key}, round {round}"
            );
            let rtc = stat(&mut c, "rtc_commands") - rtc;
            let hits = stat(&mut c, "cache_hits") - hits;
            if round == 1 {
                assert_eq!(
                    rtc,
                    cmds.len() as u64,
                    "{key}: every read on the I/O thread"
                );
                assert!(hits >= cmds.len() as u64, "{key}: {hits} cache hits");
            }
        }
    }
    // With the sets' caching off, the reads go to storage and still agree.
    q::<String>(&mut c, &["CONFIG", "SET", "cache-sets", "no"]);
    let rtc = stat(&mut c, "rtc_commands");
    let got: Vec<Value> = member_reads("set")
        .iter()
        .map(|cmd| reply(&mut c, cmd))
        .collect();
    assert_eq!(got, want[..8]);
    assert!(
        stat(&mut c, "rtc_commands") - rtc < 8,
        "storage reads on the I/O thread"
    );
}

#[test]
fn concurrent_member_reads_are_never_stale() {
    concurrent_member_reads(&[]);
}

/// Without write-allocate a write leaves the members it did not find cached uncached, so a
/// reader's fill that raced it is the only way they enter: the fill token must refuse it.
#[test]
fn concurrent_member_reads_are_never_stale_without_write_allocate() {
    concurrent_member_reads(&[
        "--cache-write-allocate",
        "no",
        "--cache-fill-delay-us",
        "300",
    ]);
}

/// One writer per key, of a set (SADD, SREM) or a sorted set (ZINCRBY, ZREM), with a DEL now
/// and then, against readers whose SMISMEMBER / ZMSCORE of every member must show a state at
/// or after the last acknowledged write (see `stale_reads`). A set's state: its members, 1
/// each; a sorted set's: its scores.
fn concurrent_member_reads(server_args: &[&str]) {
    let s = TestServer::start_with(server_args);
    let key = |k: usize| format!("{}{k}", if k.is_multiple_of(2) { "cs" } else { "cz" });
    let write = move |k: usize, n: u64, state: &mut BTreeMap<String, i64>| -> Vec<String> {
        let mut rng = Lcg(n.wrapping_mul(31) + k as u64);
        let m = format!("m{}", rng.below(MEMBERS));
        let (key, set) = (key(k), k.is_multiple_of(2));
        match rng.below(3) {
            _ if n.is_multiple_of(41) => {
                state.clear();
                vec!["DEL".into(), key]
            }
            0 if set => {
                state.remove(&m);
                vec!["SREM".into(), key, m]
            }
            _ if set => {
                state.insert(m.clone(), 1);
                vec!["SADD".into(), key, m]
            }
            0 => {
                state.remove(&m);
                vec!["ZREM".into(), key, m]
            }
            _ => {
                *state.entry(m.clone()).or_insert(0) += 1;
                vec!["ZINCRBY".into(), key, "1".into(), m]
            }
        }
    };
    let read = move |c: &mut Connection, k: usize| -> BTreeMap<String, i64> {
        if k.is_multiple_of(2) {
            smismember_all(c, &key(k))
                .into_iter()
                .map(|m| (m, 1))
                .collect()
        } else {
            zmscore_all(c, &key(k))
        }
    };
    crate::stale_reads::writes_against_reads(&s, 4, write, read);
    assert!(
        stat(&mut s.client(), "cache_hits") > 0,
        "the cache was used"
    );
}
