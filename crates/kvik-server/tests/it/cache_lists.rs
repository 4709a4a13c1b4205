//! Lists in the hot cache (`cache-list-elements`): LRANGE and LINDEX of a list's first
//! elements fill a copy of its head, which answers LRANGE, LINDEX and LLEN on the I/O thread;
//! pushes, pops and trims edit the copy with their commit, every other write drops it. A
//! stale or misplaced element in the copy would show as a wrong reply, so writers are checked
//! reply by reply against a model, with heads of every length (a limit of 4 elements leaves
//! most lists partly held), evicted all the time, and not cached at all; and readers on other
//! connections must never see a list older than the last write acknowledged before their read.

use crate::common::*;
use redis::{Connection, Value};
use std::collections::VecDeque;

/// The reply to `cmd`, an error reply as its message.
fn reply(c: &mut Connection, cmd: &[&str]) -> Value {
    command(cmd)
        .query::<Value>(c)
        .unwrap_or_else(|e| Value::SimpleString(format!("error: {e}")))
}

/// The list reads under test, over `key`.
fn list_reads(key: &str) -> Vec<Vec<&str>> {
    vec![
        vec!["LRANGE", key, "0", "-1"],
        vec!["LRANGE", key, "0", "1"],
        vec!["LRANGE", key, "-2", "-1"],
        vec!["LRANGE", key, "1", "100"],
        vec!["LRANGE", key, "5", "1"],
        vec!["LRANGE", key, "7", "9"],
        vec!["LINDEX", key, "0"],
        vec!["LINDEX", key, "-1"],
        vec!["LINDEX", key, "2"],
        vec!["LINDEX", key, "99"],
        vec!["LINDEX", key, "x"],
        vec!["LLEN", key],
    ]
}

#[test]
fn list_reads_are_served_from_the_cache_with_the_same_replies() {
    let s = TestServer::start();
    let mut c = s.client();
    q::<i64>(&mut c, &["RPUSH", "list", "a", "", "c", "dd"]);
    q::<String>(&mut c, &["SET", "str", "v"]);
    let keys = ["list", "str", "missing"];
    // The replies with lists kept out of the cache; then with them (cold), a first round
    // fills the list's head, and a second is all hits, on the I/O thread.
    q::<String>(&mut c, &["CONFIG", "SET", "cache-list-elements", "0"]);
    let want: Vec<Vec<Value>> = keys
        .iter()
        .map(|k| list_reads(k).iter().map(|cmd| reply(&mut c, cmd)).collect())
        .collect();
    assert_eq!(
        want[0][0],
        Value::Array(
            ["a", "", "c", "dd"]
                .map(|v| Value::BulkString(v.into()))
                .to_vec()
        )
    );
    assert_eq!(want[0][11], Value::Int(4));
    q::<String>(&mut c, &["CONFIG", "SET", "cache-list-elements", "1024"]);
    for round in 0..2 {
        for (key, want) in keys.iter().zip(&want) {
            let (hits, rtc) = (stat(&mut c, "cache_hits"), rtc_commands(&mut c));
            let cmds = list_reads(key);
            let got: Vec<Value> = cmds.iter().map(|cmd| reply(&mut c, cmd)).collect();
            assert_eq!(&got, want, "{key}, round {round}");
            let rtc = rtc_commands(&mut c) - rtc;
            if round == 1 {
                assert_eq!(
                    rtc,
                    cmds.len() as u64,
                    "{key}: every read on the I/O thread"
                );
                let hits = stat(&mut c, "cache_hits") - hits;
                assert!(hits >= cmds.len() as u64, "{key}: {hits} cache hits");
            }
        }
    }
    // Kept out again, the reads go to a worker.
    q::<String>(&mut c, &["CONFIG", "SET", "cache-list-elements", "0"]);
    let rtc = rtc_commands(&mut c);
    q::<Vec<String>>(&mut c, &["LRANGE", "list", "0", "-1"]);
    assert_eq!(rtc_commands(&mut c), rtc, "no list is cached with 0");
}

#[test]
fn a_long_lists_head_is_cached_and_reads_past_it_go_to_storage() {
    let s = TestServer::start_with(&["--cache-list-elements", "100"]);
    let mut c = s.client();
    let elems: Vec<String> = (0..1000).map(|i| format!("e{i}")).collect();
    let mut push = vec!["RPUSH", "long"];
    push.extend(elems.iter().map(String::as_str));
    q::<i64>(&mut c, &push);
    let range = |c: &mut Connection, a: i64, b: i64| -> Vec<String> {
        q(c, &["LRANGE", "long", &a.to_string(), &b.to_string()])
    };
    assert_eq!(range(&mut c, 0, 9), elems[..10]);
    // Filled with what that read walked: a longer read of the head fills a longer copy.
    assert_eq!(range(&mut c, 0, 59), elems[..60]);
    let rtc = rtc_commands(&mut c);
    assert_eq!(range(&mut c, 0, 59), elems[..60]);
    assert_eq!(range(&mut c, 20, 39), elems[20..40]);
    let index: String = q(&mut c, &["LINDEX", "long", "59"]);
    assert_eq!(index, "e59");
    assert_eq!(
        rtc_commands(&mut c) - rtc,
        3,
        "the head's reads on the I/O thread"
    );
    // Past the head, and past the limit: read from storage, the same elements.
    let rtc = rtc_commands(&mut c);
    assert_eq!(range(&mut c, 50, 70), elems[50..71]);
    assert_eq!(range(&mut c, 0, 500), elems[..501]);
    assert_eq!(range(&mut c, -3, -1), elems[997..]);
    assert_eq!(rtc_commands(&mut c), rtc, "reads past the head on workers");
    // Pushes keep the head current: the newest first, held up to the limit.
    q::<i64>(&mut c, &["LPUSH", "long", "n1", "n2"]);
    let mut want = vec!["n2".to_string(), "n1".into()];
    want.extend_from_slice(&elems[..58]);
    let rtc = rtc_commands(&mut c);
    assert_eq!(range(&mut c, 0, 59), want);
    assert_eq!(q::<i64>(&mut c, &["LLEN", "long"]), 1002);
    assert_eq!(rtc_commands(&mut c) - rtc, 2, "served from the edited head");
}

/// One writer's list and its expected contents.
struct Model {
    key: String,
    other: String,
    list: VecDeque<String>,
}

/// Random list commands on one key (and `other`, LMOVE's far end), each reply checked
/// against the model, then a read of the head, all of it, or an element.
fn run_writer(c: &mut Connection, k: usize, seed: u64, steps: usize) {
    let mut m = Model {
        key: format!("l{k}"),
        other: format!("o{k}"),
        list: VecDeque::new(),
    };
    let mut rng = Lcg(seed);
    let mut next = 0u64;
    for step in 0..steps {
        let label = format!("step {step} of writer {k}");
        let key = m.key.clone();
        let len = m.list.len() as i64;
        let mut fresh = || {
            next += 1;
            format!("v{k}.{next}")
        };
        match rng.below(20) {
            0..=3 => {
                let (a, b) = (fresh(), fresh());
                m.list.push_front(a.clone());
                m.list.push_front(b.clone());
                let n: usize = q(c, &["LPUSH", &key, &a, &b]);
                assert_eq!(n, m.list.len(), "LPUSH {label}");
            }
            4..=6 => {
                let a = fresh();
                m.list.push_back(a.clone());
                let n: usize = q(c, &["RPUSH", &key, &a]);
                assert_eq!(n, m.list.len(), "RPUSH {label}");
            }
            7 | 8 => {
                let n = rng.below(3);
                let want: Vec<String> = (0..n).filter_map(|_| m.list.pop_front()).collect();
                let got: Option<Vec<String>> = q(c, &["LPOP", &key, &n.to_string()]);
                assert_eq!(got.unwrap_or_default(), want, "LPOP {label}");
            }
            9 => {
                let want = m.list.pop_back();
                assert_eq!(
                    q::<Option<String>>(c, &["RPOP", &key]),
                    want,
                    "RPOP {label}"
                );
            }
            10 => {
                // LTRIM to a random window (sometimes empty).
                let a = rng.below(4) as i64;
                let b = rng.below(12) as i64 - 3;
                q::<String>(c, &["LTRIM", &key, &a.to_string(), &b.to_string()]);
                let b = if b < 0 { len + b } else { b }.min(len - 1);
                m.list = if a > b || a >= len {
                    VecDeque::new()
                } else {
                    m.list.range(a as usize..=b as usize).cloned().collect()
                };
            }
            11 if len > 0 => {
                let i = rng.below(len as u64) as usize;
                let v = fresh();
                q::<String>(c, &["LSET", &key, &i.to_string(), &v]);
                m.list[i] = v;
            }
            12 if len > 0 => {
                let i = rng.below(len as u64) as usize;
                let (pivot, v) = (m.list[i].clone(), fresh());
                let n: i64 = q(c, &["LINSERT", &key, "BEFORE", &pivot, &v]);
                m.list.insert(i, v);
                assert_eq!(n, m.list.len() as i64, "LINSERT {label}");
            }
            13 if len > 0 => {
                let i = rng.below(len as u64) as usize;
                let v = m.list.remove(i).unwrap();
                assert_eq!(q::<i64>(c, &["LREM", &key, "0", &v]), 1, "LREM {label}");
            }
            14 => {
                // To the other list's head and back to this one's tail: both ends' records
                // are written without the cache's help.
                if let Some(v) = m.list.pop_front() {
                    let got: String = q(c, &["LMOVE", &key, &m.other, "LEFT", "LEFT"]);
                    assert_eq!(got, v, "LMOVE {label}");
                    let back: String = q(c, &["LMOVE", &m.other, &key, "LEFT", "RIGHT"]);
                    assert_eq!(back, v, "LMOVE back {label}");
                    m.list.push_back(v);
                }
            }
            15 if rng.below(4) == 0 => {
                q::<i64>(c, &["DEL", &key]);
                m.list.clear();
            }
            16 => {
                // In a transaction: a push, a pop and a read of the head.
                let a = fresh();
                let got: Value = redis::pipe()
                    .atomic()
                    .cmd("LPUSH")
                    .arg(&key)
                    .arg(&a)
                    .cmd("RPOP")
                    .arg(&key)
                    .cmd("LRANGE")
                    .arg(&key)
                    .arg(0)
                    .arg(2)
                    .query(c)
                    .unwrap();
                m.list.push_front(a);
                let popped = m.list.pop_back();
                let head: Vec<Value> = m
                    .list
                    .iter()
                    .take(3)
                    .map(|v| Value::BulkString(v.clone().into_bytes()))
                    .collect();
                let want = Value::Array(vec![
                    Value::Int(m.list.len() as i64 + 1),
                    popped.map_or(Value::Nil, |v| Value::BulkString(v.into_bytes())),
                    Value::Array(head),
                ]);
                assert_eq!(got, want, "MULTI {label}");
            }
            _ => {}
        }
        let len = m.list.len();
        match rng.below(4) {
            0 => {
                let got: Vec<String> = q(c, &["LRANGE", &key, "0", "-1"]);
                assert_eq!(got, Vec::from(m.list.clone()), "LRANGE all after {label}");
            }
            1 => {
                let n = rng.below(8);
                let got: Vec<String> = q(c, &["LRANGE", &key, "0", &n.to_string()]);
                let want: Vec<String> = m.list.iter().take(n as usize + 1).cloned().collect();
                assert_eq!(got, want, "LRANGE 0 {n} after {label}");
            }
            2 => {
                let i = rng.below(8) as i64 - 3;
                let got: Option<String> = q(c, &["LINDEX", &key, &i.to_string()]);
                let at = if i < 0 { len as i64 + i } else { i };
                let want = (at >= 0)
                    .then(|| m.list.get(at as usize).cloned())
                    .flatten();
                assert_eq!(got, want, "LINDEX {i} after {label}");
            }
            _ => assert_eq!(q::<usize>(c, &["LLEN", &key]), len, "LLEN after {label}"),
        }
    }
}

fn writers_agree_with_the_model(server_args: &[&str]) -> TestServer {
    writers_agree(3, server_args)
}

/// `writers` writers (see [`run_writer`]) on their own connections and keys.
fn writers_agree(writers: usize, server_args: &[&str]) -> TestServer {
    let s = TestServer::start_with(server_args);
    let threads: Vec<_> = (0..writers)
        .map(|k| {
            let mut c = s.client();
            std::thread::spawn(move || run_writer(&mut c, k, 11 + k as u64, 1500))
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    s
}

#[test]
fn list_writes_through_the_cache_agree_with_a_model() {
    let s = writers_agree_with_the_model(&[]);
    let mut c = s.client();
    // The heads were in use: a list's read after its push was answered on the I/O thread.
    q::<i64>(&mut c, &["RPUSH", "fresh", "a"]);
    q::<Vec<String>>(&mut c, &["LRANGE", "fresh", "0", "-1"]);
    q::<i64>(&mut c, &["LPUSH", "fresh", "b"]);
    let rtc = rtc_commands(&mut c);
    let got: Vec<String> = q(&mut c, &["LRANGE", "fresh", "0", "-1"]);
    assert_eq!(got, ["b", "a"]);
    assert_eq!(
        rtc_commands(&mut c) - rtc,
        1,
        "the pushed head served on the I/O thread"
    );
    assert!(err(&mut c, &["HGET", "fresh", "a"]).starts_with("WRONGTYPE"));
    assert!(err(&mut c, &["GET", "fresh"]).starts_with("WRONGTYPE"));
    assert_eq!(q::<String>(&mut c, &["TYPE", "fresh"]), "list");
}

#[test]
fn list_writes_agree_with_a_model_with_short_heads() {
    writers_agree_with_the_model(&["--cache-list-elements", "4"]);
}

#[test]
fn list_writes_agree_with_a_model_while_heads_are_evicted() {
    // Eight lists in one shard of 2 KB: the heads evict each other (and the longer ones are
    // not cached).
    let s = writers_agree(8, &["--cache-maxmemory", "2kb", "--cache-shards", "1"]);
    assert!(
        stat(&mut s.client(), "cache_evictions") > 0,
        "the cache was too big to evict"
    );
}

#[test]
fn list_writes_agree_with_a_model_with_lists_not_cached() {
    writers_agree_with_the_model(&["--cache-list-elements", "0"]);
}

#[test]
fn concurrent_list_reads_are_never_stale() {
    concurrent_list_reads(&[]);
}

/// A fill delayed between its RocksDB read and its insertion: a write in between must make
/// the cache refuse it.
#[test]
fn concurrent_list_reads_are_never_stale_with_slow_fills() {
    concurrent_list_reads(&["--cache-fill-delay-us", "300"]);
}

/// One writer per list (LPUSH, RPOP, LTRIM, LSET, a DEL now and then) against readers whose
/// LRANGE of the whole list must show a state at or after the last acknowledged write (see
/// `stale_reads`).
fn concurrent_list_reads(server_args: &[&str]) {
    let s = TestServer::start_with(server_args);
    let write = |k: usize, n: u64, state: &mut Vec<String>| -> Vec<String> {
        let mut rng = Lcg(n.wrapping_mul(37) + k as u64);
        let key = format!("cl{k}");
        let v = format!("v{n}");
        match rng.below(5) {
            _ if n.is_multiple_of(53) => {
                state.clear();
                vec!["DEL".into(), key]
            }
            0 | 1 => {
                state.insert(0, v.clone());
                vec!["LPUSH".into(), key, v]
            }
            2 => {
                state.pop();
                vec!["RPOP".into(), key]
            }
            3 => {
                state.truncate(6);
                vec!["LTRIM".into(), key, "0".into(), "5".into()]
            }
            _ if !state.is_empty() => {
                state[0] = v.clone();
                vec!["LSET".into(), key, "0".into(), v]
            }
            _ => {
                state.push(v.clone());
                vec!["RPUSH".into(), key, v]
            }
        }
    };
    let read = |c: &mut Connection, k: usize| -> Vec<String> {
        q(c, &["LRANGE", &format!("cl{k}"), "0", "-1"])
    };
    crate::stale_reads::writes_against_reads(&s, 4, write, read);
    assert!(
        stat(&mut s.client(), "cache_hits") > 0,
        "the cache was used"
    );
}
