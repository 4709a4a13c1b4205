//! Integration tests: sets (SADD SREM SMEMBERS SISMEMBER SMISMEMBER SCARD SPOP SRANDMEMBER SMOVE
//! SINTER SINTERCARD SINTERSTORE SUNION SUNIONSTORE SDIFF SDIFFSTORE SSCAN).
//!
//! Expected replies and error texts were taken from a real redis-server 7.0.15; the last test
//! compares byte for byte with one started for the purpose (on replies whose order is defined).

use crate::common::*;
use crate::hashes::Raw;
use kvik_testkit::{Endpoint, RedisServer};
use redis::{Connection, Value};
use std::collections::{BTreeSet, HashSet};
use std::time::Duration;

fn exists(con: &mut Connection, key: &str) -> bool {
    q::<i64>(con, &["EXISTS", key]) == 1
}

fn members(con: &mut Connection, key: &str) -> BTreeSet<String> {
    q(con, &["SMEMBERS", key])
}

fn set_of(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// SADD key with every member of `members`, in one command: the number added.
fn sadd_all(con: &mut Connection, key: &str, members: impl IntoIterator<Item = String>) -> i64 {
    let mut add = redis::cmd("SADD");
    add.arg(key);
    for m in members {
        add.arg(m);
    }
    add.query(con).unwrap()
}

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

#[test]
fn set_members_add_remove_and_test() {
    let srv = TestServer::start();
    let mut c = srv.client();
    assert_eq!(q::<i64>(&mut c, &["SADD", "s", "a", "b", "b", "c"]), 3);
    assert_eq!(q::<i64>(&mut c, &["SADD", "s", "a", "d"]), 1);
    assert_eq!(q::<i64>(&mut c, &["SCARD", "s"]), 4);
    assert_eq!(q::<i64>(&mut c, &["SCARD", "nokey"]), 0);
    assert_eq!(members(&mut c, "s"), set_of(&["a", "b", "c", "d"]));
    assert_eq!(members(&mut c, "nokey"), set_of(&[]));
    assert_eq!(q::<i64>(&mut c, &["SISMEMBER", "s", "a"]), 1);
    assert_eq!(q::<i64>(&mut c, &["SISMEMBER", "s", "z"]), 0);
    assert_eq!(q::<i64>(&mut c, &["SISMEMBER", "nokey", "a"]), 0);
    assert_eq!(
        q::<Vec<i64>>(&mut c, &["SMISMEMBER", "s", "a", "z", "d"]),
        [1, 0, 1]
    );
    assert_eq!(q::<Vec<i64>>(&mut c, &["SMISMEMBER", "nokey", "a"]), [0]);
    assert_eq!(q::<String>(&mut c, &["TYPE", "s"]), "set");
    assert_eq!(q::<i64>(&mut c, &["SREM", "s", "a", "a", "zz"]), 1);
    assert_eq!(q::<i64>(&mut c, &["SREM", "nokey", "a"]), 0);
    assert_eq!(q::<i64>(&mut c, &["SREM", "s", "b", "c"]), 2);
    assert!(exists(&mut c, "s"));
    assert_eq!(q::<i64>(&mut c, &["SREM", "s", "d"]), 1);
    assert!(!exists(&mut c, "s"), "an empty set is deleted");
    // Empty members are members too.
    assert_eq!(q::<i64>(&mut c, &["SADD", "e", ""]), 1);
    assert_eq!(q::<i64>(&mut c, &["SISMEMBER", "e", ""]), 1);
    for (args, name) in [
        (&["SADD", "s"][..], "sadd"),
        (&["SREM", "s"][..], "srem"),
        (&["SMISMEMBER", "s"][..], "smismember"),
        (&["SINTER"][..], "sinter"),
        (&["SINTERSTORE", "d"][..], "sinterstore"),
        (&["SMOVE", "a", "b"][..], "smove"),
        (&["SINTERCARD", "1"][..], "sintercard"),
    ] {
        assert_eq!(
            err(&mut c, args),
            format!("ERR wrong number of arguments for '{name}' command")
        );
    }
}

#[test]
fn set_commands_refuse_other_types() {
    let srv = TestServer::start();
    let mut c = srv.client();
    q::<()>(&mut c, &["SET", "str", "x"]);
    q::<()>(&mut c, &["SADD", "s", "a"]);
    for args in [
        &["SADD", "str", "a"][..],
        &["SREM", "str", "a"],
        &["SMEMBERS", "str"],
        &["SISMEMBER", "str", "a"],
        &["SMISMEMBER", "str", "a"],
        &["SCARD", "str"],
        &["SPOP", "str"],
        &["SPOP", "str", "2"],
        &["SRANDMEMBER", "str"],
        &["SRANDMEMBER", "str", "-2"],
        &["SMOVE", "str", "s", "a"],
        &["SMOVE", "s", "str", "a"],
        &["SINTER", "s", "str"],
        // Every key is checked, even after a missing one.
        &["SINTER", "nokey", "str"],
        &["SUNION", "nokey", "str"],
        &["SDIFF", "nokey", "str"],
        &["SINTERCARD", "2", "nokey", "str"],
        &["SINTERSTORE", "d", "s", "str"],
        &["SSCAN", "str", "0"],
    ] {
        assert_eq!(err(&mut c, args), WRONGTYPE, "{args:?}");
    }
    assert!(!exists(&mut c, "d"));
    assert_eq!(members(&mut c, "s"), set_of(&["a"]));
    // A missing source makes SMOVE reply 0 before the destination's type is checked.
    assert_eq!(q::<i64>(&mut c, &["SMOVE", "nokey", "str", "a"]), 0);
    // STORE commands overwrite a destination of any type, cached or not.
    assert_eq!(
        qv(&mut c, &["GET", "str"]),
        Value::BulkString(b"x".to_vec())
    );
    assert_eq!(q::<i64>(&mut c, &["SUNIONSTORE", "str", "s"]), 1);
    assert_eq!(q::<String>(&mut c, &["TYPE", "str"]), "set");
    assert_eq!(err(&mut c, &["GET", "str"]), WRONGTYPE);
}

#[test]
fn spop_and_srandmember_counts() {
    let srv = TestServer::start();
    let mut c = srv.client();
    let names: Vec<String> = (0..40).map(|i| format!("m{i}")).collect();
    let mut add = vec!["SADD", "s"];
    add.extend(names.iter().map(|s| s.as_str()));
    q::<()>(&mut c, &add);
    let all: HashSet<String> = names.iter().cloned().collect();

    let one: String = q(&mut c, &["SRANDMEMBER", "s"]);
    assert!(all.contains(&one));
    assert_eq!(qv(&mut c, &["SRANDMEMBER", "nokey"]), Value::Nil);
    assert_eq!(
        qv(&mut c, &["SRANDMEMBER", "nokey", "-3"]),
        Value::Array(vec![])
    );
    assert_eq!(qv(&mut c, &["SRANDMEMBER", "s", "0"]), Value::Array(vec![]));
    let some: Vec<String> = q(&mut c, &["SRANDMEMBER", "s", "15"]);
    assert_eq!(some.len(), 15);
    assert_eq!(some.iter().collect::<HashSet<_>>().len(), 15);
    let every: Vec<String> = q(&mut c, &["SRANDMEMBER", "s", "9223372036854775807"]);
    assert_eq!(every.into_iter().collect::<HashSet<_>>(), all);
    let picks: Vec<String> = q(&mut c, &["SRANDMEMBER", "s", "-200"]);
    assert_eq!(picks.len(), 200);
    assert!(picks.iter().all(|m| all.contains(m)));
    assert_eq!(
        q::<i64>(&mut c, &["SCARD", "s"]),
        40,
        "SRANDMEMBER removes nothing"
    );
    assert_eq!(
        err(&mut c, &["SRANDMEMBER", "s", "1", "2"]),
        "ERR syntax error"
    );
    assert_eq!(
        err(&mut c, &["SRANDMEMBER", "s", "x"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        err(&mut c, &["SRANDMEMBER", "s", "-9223372036854775808"]),
        "ERR value is out of range, value must between -9223372036854775807 and \
         9223372036854775807"
    );
    // Redis 7.0 would build this reply until memory ran out; kvik refuses at once.
    assert_eq!(
        err(&mut c, &["SRANDMEMBER", "s", "-9223372036854775807"]),
        "ERR value is out of range"
    );

    // SPOP removes what it returns.
    let popped: String = q(&mut c, &["SPOP", "s"]);
    assert!(all.contains(&popped));
    assert_eq!(q::<i64>(&mut c, &["SISMEMBER", "s", &popped]), 0);
    let popped: Vec<String> = q(&mut c, &["SPOP", "s", "10"]);
    assert_eq!(popped.iter().collect::<HashSet<_>>().len(), 10);
    assert_eq!(q::<i64>(&mut c, &["SCARD", "s"]), 29);
    for m in &popped {
        assert_eq!(q::<i64>(&mut c, &["SISMEMBER", "s", m]), 0);
    }
    assert_eq!(qv(&mut c, &["SPOP", "s", "0"]), Value::Array(vec![]));
    assert_eq!(qv(&mut c, &["SPOP", "nokey"]), Value::Nil);
    assert_eq!(qv(&mut c, &["SPOP", "nokey", "5"]), Value::Array(vec![]));
    for bad in ["-1", "x"] {
        assert_eq!(
            err(&mut c, &["SPOP", "s", bad]),
            "ERR value is out of range, must be positive"
        );
    }
    assert_eq!(err(&mut c, &["SPOP", "s", "1", "2"]), "ERR syntax error");
    // Popping everything deletes the key.
    let rest: Vec<String> = q(&mut c, &["SPOP", "s", "1000"]);
    assert_eq!(rest.len(), 29);
    assert!(!exists(&mut c, "s"));
    q::<()>(&mut c, &["SADD", "one", "x"]);
    assert_eq!(q::<String>(&mut c, &["SPOP", "one"]), "x");
    assert!(!exists(&mut c, "one"));

    // RESP3: SPOP with a count is a set, SRANDMEMBER with a count an array.
    let mut r = Raw::resp3(srv.raw());
    r.call(&["SADD", "t", "x"]);
    assert_eq!(
        r.text(&["SRANDMEMBER", "t", "-2"]),
        "*2\r\n$1\r\nx\r\n$1\r\nx\r\n"
    );
    assert_eq!(r.text(&["SPOP", "nokey", "2"]), "~0\r\n");
    assert_eq!(r.text(&["SPOP", "nokey"]), "_\r\n");
    assert_eq!(r.text(&["SPOP", "t", "2"]), "~1\r\n$1\r\nx\r\n");
}

#[test]
fn random_picks_spread_over_a_big_set() {
    let srv = TestServer::start();
    let mut c = srv.client();
    let mut p = redis::pipe();
    for chunk in 0..20 {
        let mut cmd = redis::cmd("SADD");
        cmd.arg("big");
        for i in chunk * 1000..(chunk + 1) * 1000 {
            cmd.arg(format!("member:{i}"));
        }
        p.add_command(cmd).ignore();
    }
    p.query::<()>(&mut c).unwrap();
    assert_eq!(q::<i64>(&mut c, &["SCARD", "big"]), 20_000);
    let picks: Vec<String> = q(&mut c, &["SRANDMEMBER", "big", "-5000"]);
    assert_eq!(picks.len(), 5000);
    let distinct = picks.iter().collect::<HashSet<_>>().len();
    assert!(
        distinct > 2000,
        "only {distinct} distinct members in 5000 picks"
    );
    let some: Vec<String> = q(&mut c, &["SRANDMEMBER", "big", "30"]);
    assert_eq!(some.iter().collect::<HashSet<_>>().len(), 30);
    let popped: Vec<String> = q(&mut c, &["SPOP", "big", "25"]);
    assert_eq!(popped.iter().collect::<HashSet<_>>().len(), 25);
    assert_eq!(q::<i64>(&mut c, &["SCARD", "big"]), 19_975);
    let mut singles = HashSet::new();
    for _ in 0..50 {
        let m: String = q(&mut c, &["SPOP", "big"]);
        assert!(singles.insert(m));
    }
    assert_eq!(q::<i64>(&mut c, &["SCARD", "big"]), 19_925);
    // A big set is deleted at once and a new one of that name starts empty.
    assert_eq!(q::<i64>(&mut c, &["DEL", "big"]), 1);
    assert_eq!(q::<i64>(&mut c, &["SCARD", "big"]), 0);
    q::<()>(&mut c, &["SADD", "big", "fresh"]);
    assert_eq!(members(&mut c, "big"), set_of(&["fresh"]));
}

/// A set emptied by SPOP is read once, into a shuffled deck the pops take from
/// (`storage::pop_decks`), not walked for every pop over the tombstones of the members popped
/// before. Counted by RocksDB (INFO rocksdb `iter_skipped`), not timed: 3,000 pops step over
/// no popped member, where the walks stepped over hundreds each.
#[test]
fn spop_empties_a_set_without_stepping_over_the_members_popped_before() {
    let srv = TestServer::start();
    let mut c = srv.client();
    assert_eq!(
        sadd_all(&mut c, "s", (0..3000).map(|i| format!("m{i}"))),
        3000
    );
    let before = info_field(&mut c, "rocksdb", "iter_skipped").unwrap();
    let mut popped = HashSet::new();
    for _ in 0..3000 {
        let m: String = q(&mut c, &["SPOP", "s"]);
        assert!(popped.insert(m.clone()), "{m} popped twice");
    }
    let skipped = info_field(&mut c, "rocksdb", "iter_skipped").unwrap() - before;
    assert_eq!(popped.len(), 3000);
    assert!(popped.iter().all(|m| m.starts_with('m')));
    assert!(!exists(&mut c, "s"));
    assert_eq!(q::<Option<String>>(&mut c, &["SPOP", "s"]), None);
    assert!(
        skipped < 3000,
        "3,000 pops stepped over {skipped} entries (a walk per pop: ~1,000 each)"
    );
}

/// The deck stays the set's members in a uniform order: members added after it was dealt come
/// out, spread over the pops that follow (not all at the end); members removed by SREM and
/// SMOVE never come out; pops with counts, in MULTI/EXEC and in scripts take from the same
/// deck; every member comes out exactly once.
#[test]
fn spop_takes_members_added_after_the_deal_and_never_ones_removed() {
    let srv = TestServer::start();
    let mut c = srv.client();
    assert_eq!(
        sadd_all(&mut c, "s", (0..1000).map(|i| format!("m{i}"))),
        1000
    );
    let mut out: Vec<String> = vec![q(&mut c, &["SPOP", "s"])];
    assert_eq!(
        sadd_all(&mut c, "s", (0..200).map(|i| format!("n{i}"))),
        200
    );
    let mut removed = HashSet::new();
    for i in (0..1000).step_by(10) {
        let m = format!("m{i}");
        if out[0] != m {
            assert_eq!(q::<i64>(&mut c, &["SREM", "s", &m]), 1);
            removed.insert(m);
        }
    }
    assert_eq!(q::<i64>(&mut c, &["SMOVE", "s", "t", "m5"]), 1);
    removed.insert("m5".to_string());
    let left = 1200 - 1 - removed.len();
    let mut step = 0;
    while out.len() < 1 + left {
        step += 1;
        let got: Vec<String> = match step % 4 {
            0 => vec![q(&mut c, &["SPOP", "s"])],
            1 => q(&mut c, &["SPOP", "s", "7"]),
            2 => {
                let (a, b): (Vec<String>, String) = redis::pipe()
                    .atomic()
                    .cmd("SPOP")
                    .arg("s")
                    .arg(2)
                    .cmd("SPOP")
                    .arg("s")
                    .query(&mut c)
                    .unwrap();
                [a, vec![b]].concat()
            }
            _ => redis::cmd("EVAL")
                .arg("return {redis.call('spop', KEYS[1]), redis.call('spop', KEYS[1])}")
                .arg(1)
                .arg("s")
                .query(&mut c)
                .unwrap(),
        };
        assert!(
            !got.is_empty(),
            "the set ran out early after {} pops",
            out.len()
        );
        out.extend(got);
    }
    assert!(!exists(&mut c, "s"));
    let distinct: HashSet<&String> = out.iter().collect();
    assert_eq!(distinct.len(), out.len(), "a member popped twice");
    assert_eq!(out.len(), 1 + left);
    assert!(
        out.iter().all(|m| !removed.contains(m)),
        "a removed member popped"
    );
    // In pipelines (one I/O-thread turn each): members added and popped in the same turn.
    let mut added: HashSet<String> = (0..1000).map(|i| format!("p{i}")).collect();
    let mut taken = Vec::new();
    assert_eq!(sadd_all(&mut c, "p", added.clone()), 1000);
    let rtc_before = rtc_commands(&mut c);
    for round in 0..300 {
        let (x, y) = (format!("x{round}"), format!("y{round}"));
        let (_, a, _, b): (i64, String, i64, Vec<String>) = redis::pipe()
            .cmd("SADD")
            .arg("p")
            .arg(&x)
            .cmd("SPOP")
            .arg("p")
            .cmd("SADD")
            .arg("p")
            .arg(&y)
            .cmd("SPOP")
            .arg("p")
            .arg(2)
            .query(&mut c)
            .unwrap();
        added.insert(x);
        added.insert(y);
        taken.push(a);
        taken.extend(b);
    }
    // Only the first SPOP, which deals the deck of 1,000, needs a worker.
    let on_io_threads = rtc_commands(&mut c) - rtc_before;
    assert!(
        on_io_threads >= 1000,
        "{on_io_threads} of 1,200 ran on an I/O thread"
    );
    let rest = members(&mut c, "p");
    let distinct: HashSet<&String> = taken.iter().collect();
    assert_eq!(
        distinct.len(),
        taken.len(),
        "a pipelined pop took a member twice"
    );
    assert!(taken.iter().all(|m| added.contains(m) && !rest.contains(m)));
    assert_eq!(taken.len() + rest.len(), added.len());
    // The 200 added after the deal, among ~1,090 pops: each half holds ~100 of them.
    let first_half = out[..out.len() / 2]
        .iter()
        .filter(|m| m.starts_with('n'))
        .count();
    assert!(
        (50..=150).contains(&first_half),
        "{first_half} of the 200 members added after the deal came out in the first half"
    );
}

/// SRANDMEMBER draws from the set's deck (`storage::pop_decks`), dealt by the first read on a
/// worker, then on the I/O thread: members removed after the deal never come back, members
/// added after it do, with and without counts, and a deck gone mostly stale is dealt again.
#[test]
fn srandmember_draws_from_the_deck_only_what_the_set_holds() {
    let srv = TestServer::start();
    let mut c = srv.client();
    assert_eq!(
        sadd_all(&mut c, "s", (0..1000).map(|i| format!("m{i}"))),
        1000
    );
    let _: String = q(&mut c, &["SRANDMEMBER", "s"]);
    let mut removed: HashSet<String> = (0..100).map(|i| format!("m{i}")).collect();
    let mut rem = redis::cmd("SREM");
    rem.arg("s");
    for m in &removed {
        rem.arg(m);
    }
    assert_eq!(rem.query::<i64>(&mut c).unwrap(), 100);
    assert_eq!(
        sadd_all(&mut c, "s", (0..100).map(|i| format!("n{i}"))),
        100
    );
    let rtc_before = rtc_commands(&mut c);
    let mut seen = HashSet::new();
    for _ in 0..2000 {
        let m: String = q(&mut c, &["SRANDMEMBER", "s"]);
        assert!(!removed.contains(&m), "{m} was removed");
        seen.insert(m);
    }
    let on_io_threads = rtc_commands(&mut c) - rtc_before;
    assert!(
        on_io_threads >= 1500,
        "{on_io_threads} of 2,000 ran on an I/O thread"
    );
    // 2,000 picks of 1,000 members: ~865 distinct, ~200 picks of the 100 added.
    assert!(seen.len() >= 600, "only {} distinct members", seen.len());
    let added = seen.iter().filter(|m| m.starts_with('n')).count();
    assert!(
        added >= 30,
        "only {added} of the members added after the deal came out"
    );
    for _ in 0..50 {
        let some: Vec<String> = q(&mut c, &["SRANDMEMBER", "s", "20"]);
        assert_eq!(some.iter().collect::<HashSet<_>>().len(), 20);
        let rep: Vec<String> = q(&mut c, &["SRANDMEMBER", "s", "-30"]);
        assert_eq!(rep.len(), 30);
        assert!(some.iter().chain(&rep).all(|m| !removed.contains(m)));
    }
    // Most of the deck stale: the reads deal again and stay exact.
    let mut rem = redis::cmd("SREM");
    rem.arg("s");
    for i in 100..900 {
        rem.arg(format!("m{i}"));
        removed.insert(format!("m{i}"));
    }
    assert_eq!(rem.query::<i64>(&mut c).unwrap(), 800);
    let mut seen = HashSet::new();
    for _ in 0..500 {
        let m: String = q(&mut c, &["SRANDMEMBER", "s"]);
        assert!(!removed.contains(&m), "{m} was removed");
        seen.insert(m);
    }
    assert!(
        seen.len() >= 120,
        "only {} distinct of 200 members",
        seen.len()
    );
    // Picks from a deck keep the reply within proto-max-bulk-len, as walks do: 8 picks of
    // 200 KB members pass 1 MB.
    q::<()>(&mut c, &["CONFIG", "SET", "proto-max-bulk-len", "1mb"]);
    let big = "x".repeat(200_000);
    let members: Vec<String> = (0..8).map(|i| format!("{i}{big}")).collect();
    assert_eq!(sadd_all(&mut c, "big", members), 8);
    let _: String = q(&mut c, &["SRANDMEMBER", "big"]);
    assert_eq!(
        err(&mut c, &["SRANDMEMBER", "big", "-8"]),
        "ERR value is out of range"
    );
    assert_eq!(
        q::<Vec<String>>(&mut c, &["SRANDMEMBER", "big", "-2"]).len(),
        2
    );
}

#[test]
fn smove_moves_one_member() {
    let srv = TestServer::start();
    let mut c = srv.client();
    q::<()>(&mut c, &["SADD", "a", "x", "y"]);
    q::<()>(&mut c, &["SADD", "b", "y"]);
    assert_eq!(q::<i64>(&mut c, &["SMOVE", "a", "b", "x"]), 1);
    assert_eq!(members(&mut c, "a"), set_of(&["y"]));
    assert_eq!(members(&mut c, "b"), set_of(&["x", "y"]));
    assert_eq!(q::<i64>(&mut c, &["SMOVE", "a", "b", "zz"]), 0);
    // Already in the destination: removed from the source only.
    assert_eq!(q::<i64>(&mut c, &["SMOVE", "a", "b", "y"]), 1);
    assert!(!exists(&mut c, "a"), "the emptied source is deleted");
    assert_eq!(q::<i64>(&mut c, &["SCARD", "b"]), 2);
    // Same source and destination: 1 if a member, nothing changes.
    assert_eq!(q::<i64>(&mut c, &["SMOVE", "b", "b", "x"]), 1);
    assert_eq!(q::<i64>(&mut c, &["SMOVE", "b", "b", "q"]), 0);
    assert_eq!(q::<i64>(&mut c, &["SCARD", "b"]), 2);
    // To a new key.
    assert_eq!(q::<i64>(&mut c, &["SMOVE", "b", "c", "x"]), 1);
    assert_eq!(members(&mut c, "c"), set_of(&["x"]));
    assert_eq!(q::<i64>(&mut c, &["SMOVE", "nokey", "c", "x"]), 0);
}

#[test]
fn set_algebra_and_store() {
    let srv = TestServer::start();
    let mut c = srv.client();
    q::<()>(&mut c, &["SADD", "s1", "a", "b", "c", "d"]);
    q::<()>(&mut c, &["SADD", "s2", "c", "d", "e"]);
    q::<()>(&mut c, &["SADD", "s3", "d", "e", "f"]);
    let set = |c: &mut Connection, args: &[&str]| -> BTreeSet<String> { q(c, args) };
    assert_eq!(set(&mut c, &["SINTER", "s1", "s2"]), set_of(&["c", "d"]));
    assert_eq!(set(&mut c, &["SINTER", "s1", "s2", "s3"]), set_of(&["d"]));
    assert_eq!(set(&mut c, &["SINTER", "s1", "nokey"]), set_of(&[]));
    assert_eq!(
        set(&mut c, &["SINTER", "s1", "s1"]),
        set_of(&["a", "b", "c", "d"])
    );
    assert_eq!(
        set(&mut c, &["SUNION", "s1", "s2", "nokey", "s3"]),
        set_of(&["a", "b", "c", "d", "e", "f"])
    );
    assert_eq!(set(&mut c, &["SDIFF", "s1", "s2"]), set_of(&["a", "b"]));
    assert_eq!(
        set(&mut c, &["SDIFF", "s1", "s2", "s3", "nokey"]),
        set_of(&["a", "b"])
    );
    assert_eq!(set(&mut c, &["SDIFF", "s1", "s1"]), set_of(&[]));
    assert_eq!(set(&mut c, &["SDIFF", "nokey", "s1"]), set_of(&[]));

    assert_eq!(q::<i64>(&mut c, &["SINTERCARD", "2", "s1", "s2"]), 2);
    assert_eq!(
        q::<i64>(&mut c, &["SINTERCARD", "2", "s1", "s2", "LIMIT", "1"]),
        1
    );
    assert_eq!(
        q::<i64>(&mut c, &["SINTERCARD", "2", "s1", "s2", "limit", "0"]),
        2
    );
    assert_eq!(q::<i64>(&mut c, &["SINTERCARD", "1", "s1"]), 4);
    assert_eq!(q::<i64>(&mut c, &["SINTERCARD", "2", "s1", "nokey"]), 0);
    for (args, e) in [
        (
            &["SINTERCARD", "0", "s1"][..],
            "ERR numkeys should be greater than 0",
        ),
        (
            &["SINTERCARD", "x", "s1"],
            "ERR numkeys should be greater than 0",
        ),
        (
            &["SINTERCARD", "3", "s1", "s2"],
            "ERR Number of keys can't be greater than number of args",
        ),
        (
            &["SINTERCARD", "1", "s1", "LIMIT", "-1"],
            "ERR LIMIT can't be negative",
        ),
        (
            &["SINTERCARD", "1", "s1", "LIMIT", "x"],
            "ERR LIMIT can't be negative",
        ),
        (&["SINTERCARD", "1", "s1", "LIMIT"], "ERR syntax error"),
        (&["SINTERCARD", "1", "s1", "FOO", "1"], "ERR syntax error"),
    ] {
        assert_eq!(err(&mut c, args), e, "{args:?}");
    }
    // COMMAND GETKEYS finds SINTERCARD's keys through numkeys.
    assert_eq!(
        q::<Vec<String>>(
            &mut c,
            &[
                "COMMAND",
                "GETKEYS",
                "SINTERCARD",
                "2",
                "s1",
                "s2",
                "LIMIT",
                "1"
            ]
        ),
        ["s1", "s2"]
    );

    assert_eq!(q::<i64>(&mut c, &["SINTERSTORE", "d", "s1", "s2"]), 2);
    assert_eq!(members(&mut c, "d"), set_of(&["c", "d"]));
    assert_eq!(q::<i64>(&mut c, &["SUNIONSTORE", "d", "s1", "s3"]), 6);
    assert_eq!(
        members(&mut c, "d"),
        set_of(&["a", "b", "c", "d", "e", "f"])
    );
    assert_eq!(q::<i64>(&mut c, &["SDIFFSTORE", "d", "s1", "s2"]), 2);
    assert_eq!(
        members(&mut c, "d"),
        set_of(&["a", "b"]),
        "the old members are gone"
    );
    // A destination that is also a source.
    assert_eq!(q::<i64>(&mut c, &["SUNIONSTORE", "s1", "s1", "s3"]), 6);
    assert_eq!(q::<i64>(&mut c, &["SCARD", "s1"]), 6);
    // The stored set has no expiry, whatever the destination had.
    q::<()>(&mut c, &["EXPIRE", "d", "100"]);
    assert_eq!(q::<i64>(&mut c, &["SINTERSTORE", "d", "s1", "s2"]), 3);
    assert_eq!(q::<i64>(&mut c, &["TTL", "d"]), -1);
    // An empty result deletes the destination and replies 0.
    assert_eq!(q::<i64>(&mut c, &["SINTERSTORE", "d", "s1", "nokey"]), 0);
    assert!(!exists(&mut c, "d"));
    q::<()>(&mut c, &["SET", "d", "string"]);
    assert_eq!(q::<i64>(&mut c, &["SDIFFSTORE", "d", "s2", "s2"]), 0);
    assert!(!exists(&mut c, "d"));
    assert_eq!(q::<i64>(&mut c, &["SUNIONSTORE", "d", "nokey"]), 0);
    assert!(!exists(&mut c, "d"));
}

#[test]
fn set_algebra_over_bigger_sets() {
    let srv = TestServer::start();
    let mut c = srv.client();
    let mut p = redis::pipe();
    let mut evens = redis::cmd("SADD");
    evens.arg("evens");
    let mut threes = redis::cmd("SADD");
    threes.arg("threes");
    for i in 0..3000 {
        if i % 2 == 0 {
            evens.arg(i);
        }
        if i % 3 == 0 {
            threes.arg(i);
        }
    }
    p.add_command(evens).ignore().add_command(threes).ignore();
    p.query::<()>(&mut c).unwrap();
    let inter: BTreeSet<i64> = q(&mut c, &["SINTER", "evens", "threes"]);
    let expected: BTreeSet<i64> = (0..3000).filter(|i| i % 6 == 0).collect();
    assert_eq!(inter, expected);
    assert_eq!(
        q::<i64>(&mut c, &["SINTERCARD", "2", "threes", "evens"]),
        500
    );
    assert_eq!(
        q::<i64>(
            &mut c,
            &["SINTERCARD", "2", "threes", "evens", "LIMIT", "321"]
        ),
        321
    );
    assert_eq!(
        q::<i64>(&mut c, &["SUNIONSTORE", "u", "evens", "threes"]),
        2000
    );
    assert_eq!(
        q::<i64>(&mut c, &["SDIFFSTORE", "d", "evens", "threes"]),
        1000
    );
    let diff: BTreeSet<i64> = q(&mut c, &["SMEMBERS", "d"]);
    assert!(diff.iter().all(|i| i % 2 == 0 && i % 3 != 0));
}

#[test]
fn sscan_visits_every_member_once() {
    let srv = TestServer::start();
    let mut c = srv.client();
    let mut cmd = redis::cmd("SADD");
    cmd.arg("s");
    for i in 0..500 {
        cmd.arg(format!("m{i}"));
    }
    cmd.query::<()>(&mut c).unwrap();
    let mut seen = HashSet::new();
    let mut cursor = "0".to_string();
    let mut calls = 0;
    loop {
        let (next, items): (String, Vec<String>) = q(&mut c, &["SSCAN", "s", &cursor]);
        assert!(items.len() <= 10);
        for m in items {
            assert!(seen.insert(m.clone()), "{m} twice");
        }
        calls += 1;
        assert!(calls < 200, "the scan never ended");
        if next == "0" {
            break;
        }
        cursor = next;
    }
    assert_eq!(seen.len(), 500);
    let (next, items): (String, Vec<String>) = q(
        &mut c,
        &["SSCAN", "s", "0", "MATCH", "m4?", "COUNT", "1000"],
    );
    assert_eq!(next, "0");
    assert_eq!(items.len(), 10);
    assert_eq!(err(&mut c, &["SSCAN", "s", "x"]), "ERR invalid cursor");
    assert_eq!(
        err(&mut c, &["SSCAN", "s", "0", "COUNT", "0"]),
        "ERR syntax error"
    );
}

#[test]
fn set_replies_in_resp3_are_sets() {
    let srv = TestServer::start();
    let mut r = Raw::resp3(srv.raw());
    r.call(&["SADD", "s", "b", "a"]);
    assert_eq!(r.text(&["SMEMBERS", "s"]), "~2\r\n$1\r\na\r\n$1\r\nb\r\n");
    assert_eq!(r.text(&["SMEMBERS", "nokey"]), "~0\r\n");
    assert_eq!(
        r.text(&["SINTER", "s", "s"]),
        "~2\r\n$1\r\na\r\n$1\r\nb\r\n"
    );
    assert_eq!(r.text(&["SUNION", "nokey"]), "~0\r\n");
    assert_eq!(
        r.text(&["SDIFF", "s", "nokey"]),
        "~2\r\n$1\r\na\r\n$1\r\nb\r\n"
    );
    assert_eq!(r.text(&["SMISMEMBER", "s", "a", "z"]), "*2\r\n:1\r\n:0\r\n");
    assert_eq!(r.text(&["SSCAN", "nokey", "0"]), "*2\r\n$1\r\n0\r\n*0\r\n");
}

#[test]
fn an_expired_set_is_gone_and_sets_survive_a_restart() {
    let mut srv = TestServer::start();
    {
        let mut c = srv.client();
        q::<()>(&mut c, &["SADD", "keep", "a", "b", "c"]);
        q::<()>(&mut c, &["SREM", "keep", "b"]);
        q::<()>(&mut c, &["SADD", "gone", "x", "y"]);
        assert_eq!(q::<i64>(&mut c, &["PEXPIRE", "gone", "100"]), 1);
        assert!(eventually(Duration::from_secs(10), || !exists(
            &mut c, "gone"
        )));
        assert_eq!(q::<i64>(&mut c, &["SCARD", "gone"]), 0);
        assert_eq!(q::<i64>(&mut c, &["SISMEMBER", "gone", "x"]), 0);
        assert_eq!(q::<i64>(&mut c, &["SADD", "gone", "z"]), 1);
        assert_eq!(members(&mut c, "gone"), set_of(&["z"]));
    }
    srv.restart();
    let mut c = srv.client();
    assert_eq!(members(&mut c, "keep"), set_of(&["a", "c"]));
    assert_eq!(members(&mut c, "gone"), set_of(&["z"]));
}

/// Commands whose replies have a defined order (single members, counts, sorted-free shapes),
/// sent to kvik and to a real redis-server 7.0.
#[test]
fn set_replies_match_real_redis() {
    let srv = TestServer::start();
    let redis = RedisServer::start(&[]);
    let script: &[&[&str]] = &[
        &["SADD", "s", "a", "b", "c", "a"],
        &["SADD", "t", "c", "d"],
        &["SADD", "one", "x"],
        &["SREM", "s", "zz", "a", "a"],
        &["SCARD", "s"],
        &["SISMEMBER", "s", "b"],
        &["SMISMEMBER", "s", "b", "a", "c"],
        &["SMEMBERS", "one"],
        &["SRANDMEMBER", "one", "-3"],
        &["SRANDMEMBER", "one", "3"],
        &["SRANDMEMBER", "nokey"],
        &["SRANDMEMBER", "nokey", "5"],
        &["SRANDMEMBER", "s", "1", "2"],
        &["SRANDMEMBER", "s", "-9223372036854775808"],
        &["SPOP", "s", "-1"],
        &["SPOP", "s", "0"],
        &["SPOP", "nokey", "2"],
        &["SINTER", "s", "t"],
        &["SINTER", "s", "nokey"],
        &["SUNION", "one", "nokey"],
        &["SDIFF", "t", "s"],
        &["SINTERCARD", "2", "s", "t"],
        &["SINTERCARD", "2", "s"],
        &["SINTERCARD", "0", "s"],
        &["SINTERCARD", "1", "s", "LIMIT", "-5"],
        &["SINTERSTORE", "d", "s", "t"],
        &["SMEMBERS", "d"],
        &["SDIFFSTORE", "d", "s", "s"],
        &["EXISTS", "d"],
        &["SMOVE", "s", "t", "b"],
        &["SMOVE", "s", "t", "b"],
        &["SISMEMBER", "t", "b"],
        &["SET", "str", "v"],
        &["SADD", "str", "a"],
        &["SINTER", "nokey", "str"],
        &["SMOVE", "nokey", "str", "a"],
        &["SMOVE", "t", "str", "c"],
        &["SSCAN", "one", "0"],
        &["SSCAN", "one", "0", "COUNT", "0"],
        &["SPOP", "one", "3"],
        &["EXISTS", "one"],
        &["SPOP", "one"],
    ];
    for proto in ["2", "3"] {
        let (mut a, mut b) = if proto == "3" {
            (Raw::resp3(srv.raw()), Raw::resp3(redis.raw()))
        } else {
            (Raw::new(srv.raw()), Raw::new(redis.raw()))
        };
        a.call(&["FLUSHALL"]);
        b.call(&["FLUSHALL"]);
        for args in script {
            assert_eq!(a.text(args), b.text(args), "RESP{proto} {args:?}");
        }
    }
}

#[test]
fn set_writes_work_in_transactions_and_touch_watched_keys() {
    let srv = TestServer::start();
    let mut c = srv.client();
    let mut other = srv.client();
    q::<()>(&mut c, &["SADD", "a", "x", "y"]);
    q::<()>(&mut c, &["SADD", "b", "y"]);
    q::<()>(&mut c, &["MULTI"]);
    for args in [
        &["SADD", "a", "z"][..],
        &["SINTERSTORE", "d", "a", "b"],
        &["SMOVE", "a", "b", "x"],
        &["SINTERCARD", "2", "a", "b"],
    ] {
        assert_eq!(qv(&mut c, args), Value::SimpleString("QUEUED".into()));
    }
    assert_eq!(
        q::<Vec<i64>>(&mut c, &["EXEC"]),
        [1, 1, 1, 1],
        "SADD, SINTERSTORE, SMOVE, SINTERCARD"
    );
    assert_eq!(members(&mut c, "b"), set_of(&["x", "y"]));
    // A member write to a watched set (even one that only changes members) aborts EXEC.
    q::<()>(&mut c, &["WATCH", "a"]);
    q::<()>(&mut other, &["SREM", "a", "z"]);
    q::<()>(&mut c, &["MULTI"]);
    q::<()>(&mut c, &["SADD", "a", "w"]);
    assert_eq!(qv(&mut c, &["EXEC"]), Value::Nil);
    assert_eq!(members(&mut c, "a"), set_of(&["y"]));
}
