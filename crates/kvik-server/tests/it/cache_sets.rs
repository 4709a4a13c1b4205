//! Sets and sorted sets in the hot cache (`cache-sets`): a write leaves the collection's meta
//! record and the members it wrote cached, and the next write takes the length and each
//! member's prior state (a sorted set's score) from there instead of RocksDB. A cached member
//! that is stale would show as a wrong reply (SADD's count, ZINCRBY's score) or a wrong
//! length, so writers on several connections are checked reply by reply against a model per
//! key, through the writes that keep the cache (SADD SREM SPOP ZADD ZINCRBY ZREM ZPOPMIN) and
//! those that drop it (SMOVE, SUNIONSTORE, ZUNIONSTORE, RENAME, DEL, MULTI/EXEC, scripts),
//! with member entries evicted all the time and not at all.

use crate::common::*;
use redis::Connection;
use std::collections::{BTreeMap, BTreeSet};

/// A deterministic generator (the sequence must be reproducible from its seed).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
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
    }
}

/// Runs `steps` random writes of one writer's keys, each reply checked against the model,
/// the keys checked whole every few steps.
fn run_writer(c: &mut Connection, k: usize, seed: u64, steps: usize) {
    let mut m = Model::new(k);
    let mut rng = Rng(seed);
    for step in 0..steps {
        let a = format!("m{}", rng.below(24));
        let b = format!("m{}", rng.below(24));
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
