//! One key written by many connections at once (`rtc-lock-retries`): a command whose key
//! another thread holds is tried again on the I/O thread's next turns, then handed to a worker;
//! either way every write happens once, each connection's commands keep their order, and the
//! retries are counted in INFO (`rtc_lock_retries`).

use crate::common::*;
use redis::Connection;
use std::time::{Duration, Instant};

/// A script that increments KEYS[1], then keeps running (holding the key's lock on a worker,
/// once past the I/O thread's budget) for ARGV[1] milliseconds.
const HOLD: &str = "redis.call('incr', KEYS[1]) \
    local t = redis.call('time') local start = t[1] * 1000 + t[2] / 1000 \
    repeat t = redis.call('time') until t[1] * 1000 + t[2] / 1000 - start >= tonumber(ARGV[1]) \
    return 1";

/// Starts HOLD on `key` for `ms` from a connection of its own, and returns once a worker runs
/// it (the I/O thread's try ended at its budget: `rtc_script_budget_aborts` went up). Each
/// call's script differs by a comment: an I/O thread sends a script it saw run long straight
/// to the pool, which would not count an abort.
fn hold_on_a_worker(s: &TestServer, key: &str, ms: u64) -> std::thread::JoinHandle<()> {
    static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let script = format!("{HOLD} -- {call}");
    let mut watcher = s.client();
    let aborts = stat(&mut watcher, "rtc_script_budget_aborts");
    let mut holder = s.client();
    let key = key.to_string();
    let held = std::thread::spawn(move || {
        let _: i64 = redis::cmd("EVAL")
            .arg(script)
            .arg(1)
            .arg(&key)
            .arg(ms)
            .query(&mut holder)
            .unwrap();
    });
    let deadline = Instant::now() + Duration::from_secs(10);
    while stat(&mut watcher, "rtc_script_budget_aborts") == aborts {
        assert!(
            Instant::now() < deadline,
            "the script never left the I/O thread"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    std::thread::sleep(Duration::from_millis(20)); // the worker has taken the key by now
    held
}

/// A write of a key a worker holds is tried again on `rtc-lock-retries` later turns (counted
/// exactly), then runs on a worker after the holder; with the setting at 0 it goes to the
/// worker at once.
#[test]
fn a_write_of_a_held_key_is_tried_again_on_later_turns_then_by_a_worker() {
    let s = TestServer::start_with(&["--io-threads", "2", "--io-threads-adaptive", "no"]);
    let mut c = s.client();
    for (retries, expect) in [(8u64, 2i64), (3, 4), (0, 6)] {
        let _: () = q(
            &mut c,
            &["CONFIG", "SET", "rtc-lock-retries", &retries.to_string()],
        );
        let before = stat(&mut c, "rtc_lock_retries");
        let held = hold_on_a_worker(&s, "k", 400);
        let mut writer = s.client();
        let n: i64 = q(&mut writer, &["INCR", "k"]);
        held.join().unwrap();
        assert_eq!(n, expect, "the INCR ran after the holder's");
        assert_eq!(
            stat(&mut c, "rtc_lock_retries") - before,
            retries,
            "tries again with rtc-lock-retries {retries}"
        );
    }
}

/// Connections pipelining writes and reads of one hot key and one hot hash, while a worker
/// holds the key for a while (so runs wait in the I/O threads' retries, and some reach the
/// pool): every INCR reply is distinct, each connection's are increasing, and each
/// connection reads back its own last write, as sequential execution would return.
#[test]
fn pipelined_writers_of_one_key_lose_nothing_and_keep_their_order() {
    let s = TestServer::start_with(&["--io-threads", "2", "--io-threads-adaptive", "no"]);
    let mut c = s.client();
    let before = stat(&mut c, "rtc_lock_retries");
    const CONNS: usize = 12;
    const ROUNDS: usize = 40;
    const DEPTH: usize = 8;
    let go = std::sync::Arc::new(std::sync::Barrier::new(CONNS + 1));
    let writers: Vec<_> = (0..CONNS)
        .map(|w| {
            let mut con: Connection = s.client();
            let go = go.clone();
            std::thread::spawn(move || {
                go.wait();
                let mut seen = Vec::new();
                for r in 0..ROUNDS {
                    let mut p = redis::pipe();
                    for d in 0..DEPTH {
                        let v = format!("{w}-{r}-{d}");
                        p.cmd("INCR").arg("hot");
                        p.cmd("HSET").arg("h").arg(format!("f{w}")).arg(&v);
                        p.cmd("HGET").arg("h").arg(format!("f{w}"));
                    }
                    let replies: Vec<redis::Value> = p.query(&mut con).unwrap();
                    for (d, triple) in replies.chunks(3).enumerate() {
                        let redis::Value::Int(n) = triple[0] else {
                            panic!("INCR replied {:?}", triple[0]);
                        };
                        seen.push(n);
                        let v = format!("{w}-{r}-{d}");
                        assert_eq!(
                            triple[2],
                            redis::Value::BulkString(v.into_bytes()),
                            "connection {w} read back another write than its last"
                        );
                    }
                }
                seen
            })
        })
        .collect();
    let held = hold_on_a_worker(&s, "hot", 200);
    go.wait();
    let mut all = Vec::new();
    for w in writers {
        let seen = w.join().unwrap();
        assert!(
            seen.windows(2).all(|p| p[0] < p[1]),
            "one connection's INCRs out of order"
        );
        all.extend(seen);
    }
    held.join().unwrap();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), CONNS * ROUNDS * DEPTH, "two INCRs got one value");
    let total: i64 = q(&mut c, &["GET", "hot"]);
    assert_eq!(total as usize, CONNS * ROUNDS * DEPTH + 1);
    assert!(
        stat(&mut c, "rtc_lock_retries") > before,
        "no command waited in a retry"
    );
}

/// Every connection pipelines `rounds` runs of INCRs of one key at once; checks that each
/// connection's replies increase and that no two INCRs got one value.
fn incr_together(cons: &mut Vec<Connection>, rounds: usize) {
    const DEPTH: usize = 32;
    let go = std::sync::Arc::new(std::sync::Barrier::new(cons.len()));
    let workers: Vec<_> = cons
        .drain(..)
        .map(|mut con| {
            let go = go.clone();
            std::thread::spawn(move || {
                go.wait();
                let mut seen = Vec::new();
                for _ in 0..rounds {
                    let mut p = redis::pipe();
                    for _ in 0..DEPTH {
                        p.cmd("INCR").arg("hot");
                    }
                    let replies: Vec<i64> = p.query(&mut con).unwrap();
                    seen.extend(replies);
                }
                assert!(
                    seen.windows(2).all(|p| p[0] < p[1]),
                    "one connection's INCRs out of order"
                );
                (con, seen)
            })
        })
        .collect();
    let mut all = Vec::new();
    for w in workers {
        let (con, seen) = w.join().unwrap();
        cons.push(con);
        all.extend(seen);
    }
    let n = all.len();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), n, "two INCRs got one value");
}

/// Connections of both I/O threads writing one hot key (`io-key-affinity`): with it on they
/// end up on one thread (CLIENT INFO `io-thread=`, INFO `io_key_affinity_moves`), losing and
/// reordering nothing on the way, and a moved connection still gets its pub/sub messages and
/// its CLIENT KILL; with it off every connection stays where it was accepted.
#[test]
fn writers_of_one_hot_key_move_to_one_io_thread() {
    const CONNS: usize = 8;
    for on in [false, true] {
        let s = TestServer::start_with(&[
            "--io-threads",
            "2",
            "--io-threads-adaptive",
            "no",
            "--io-key-affinity",
            if on { "yes" } else { "no" },
        ]);
        let mut c = s.client();
        let mut cons: Vec<Connection> = (0..CONNS).map(|_| s.client()).collect();
        let accepted: Vec<String> = cons.iter_mut().map(io_thread_of).collect();
        let threads = |cons: &mut Vec<Connection>| {
            let mut t: Vec<String> = cons.iter_mut().map(io_thread_of).collect();
            t.sort();
            t.dedup();
            t.len()
        };
        assert_eq!(threads(&mut cons), 2, "accepted on both I/O threads");
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut batches = 0;
        loop {
            incr_together(&mut cons, 20);
            batches += 1;
            let done = if on {
                threads(&mut cons) == 1
            } else {
                batches == 3
            };
            if done {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the writers of one key never came to one I/O thread"
            );
        }
        let total: i64 = q(&mut c, &["GET", "hot"]);
        assert_eq!(total as usize, batches * CONNS * 20 * 32);
        let moves = stat(&mut c, "io_key_affinity_moves");
        if !on {
            assert_eq!(threads(&mut cons), 2, "moved with io-key-affinity no");
            assert_eq!(moves, 0);
            continue;
        }
        assert!(moves >= (CONNS / 2) as u64, "{moves} moves");
        // Connections that moved: the first gets a message published to it, the second is
        // killed.
        let now: Vec<String> = cons.iter_mut().map(io_thread_of).collect();
        let mut moved: Vec<Connection> = cons
            .into_iter()
            .zip(accepted.iter().zip(&now))
            .filter(|(_, (a, n))| a != n)
            .map(|(con, _)| con)
            .collect();
        assert!(moved.len() >= 2, "{accepted:?} -> {now:?}");
        let mut victim = moved.pop().unwrap();
        let victim_id: i64 = q(&mut victim, &["CLIENT", "ID"]);
        let mut listener = moved.pop().unwrap();
        listener
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let mut sub = listener.as_pubsub();
        sub.subscribe("news").unwrap();
        let receivers: i64 = q(&mut c, &["PUBLISH", "news", "hello"]);
        assert_eq!(receivers, 1);
        let msg = sub
            .get_message()
            .expect("the moved subscriber got the message");
        assert_eq!(msg.get_payload::<String>().unwrap(), "hello");
        let killed: i64 = q(&mut c, &["CLIENT", "KILL", "ID", &victim_id.to_string()]);
        assert_eq!(killed, 1);
        // Closed by its new I/O thread without a word from the client.
        let deadline = Instant::now() + Duration::from_secs(5);
        let listed = |c: &mut Connection| {
            let list: String = q(c, &["CLIENT", "LIST", "ID", &victim_id.to_string()]);
            !list.is_empty()
        };
        while listed(&mut c) {
            assert!(
                Instant::now() < deadline,
                "the moved connection was not closed by CLIENT KILL"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        drop(victim);
    }
}

/// A read a worker runs (HRANDFIELD of a quarter of a big hash, read in one pass) leaves its key to
/// the I/O threads' reads meanwhile (`pool-reads-unlocked`): HGETs of the same hash from
/// another connection run on the I/O thread without one retry. With the setting off the worker
/// holds the key's lock as it reads and the HGETs find it held (counted in
/// `rtc_lock_retries`), which is how one read sent to the pool used to draw the key's other
/// reads there after it.
#[test]
fn a_read_on_a_worker_leaves_its_key_to_the_io_threads_reads() {
    const FIELDS: usize = 20_000;
    for unlocked in ["no", "yes"] {
        let s = TestServer::start_with(&["--pool-reads-unlocked", unlocked]);
        let mut c = s.client();
        for chunk in (0..FIELDS).collect::<Vec<_>>().chunks(1000) {
            let mut cmd = redis::cmd("HSET");
            cmd.arg("big");
            for i in chunk {
                cmd.arg(format!("f{i}")).arg(format!("value-{i}"));
            }
            let _: i64 = cmd.query(&mut c).unwrap();
        }
        let before = (
            stat(&mut c, "rtc_lock_retries"),
            stat(&mut c, "pool_commands"),
            rtc_commands(&mut c),
        );
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let done = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let reader = {
            let mut con = s.client();
            let (stop, done) = (stop.clone(), done.clone());
            std::thread::spawn(move || {
                let mut reads = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let some: Vec<String> = q(&mut con, &["HRANDFIELD", "big", "8000"]);
                    assert_eq!(some.len(), 8000);
                    reads += 1;
                    done.store(reads as usize, std::sync::atomic::Ordering::Relaxed);
                }
                reads
            })
        };
        // Let the first HRANDFIELD reach a worker, then read beside it.
        let deadline = Instant::now() + Duration::from_secs(10);
        while stat(&mut c, "pool_commands") == before.1 {
            assert!(Instant::now() < deadline, "no HRANDFIELD ran on a worker");
            std::thread::sleep(Duration::from_millis(1));
        }
        // At least 2,000 HGETs, and on until the worker has read a few times beside them (on
        // a loaded machine 2,000 HGETs may end before its second read does).
        let mut hget = s.client();
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut hgets = 0u64;
        while hgets < 2000 || done.load(std::sync::atomic::Ordering::Relaxed) < 4 {
            assert!(
                Instant::now() < deadline,
                "the HRANDFIELDs never overlapped"
            );
            let i = hgets as usize % FIELDS;
            let v: String = q(&mut hget, &["HGET", "big", &format!("f{i}")]);
            assert_eq!(v, format!("value-{i}"));
            hgets += 1;
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let reads = reader.join().unwrap();
        let held = stat(&mut c, "rtc_lock_retries") - before.0;
        let on_io_threads = rtc_commands(&mut c) - before.2;
        eprintln!(
            "pool-reads-unlocked {unlocked}: {reads} HRANDFIELDs on workers, {held} HGETs found the key held, {on_io_threads} commands on I/O threads"
        );
        assert!(reads > 2, "too little overlap: {reads} HRANDFIELDs");
        if unlocked == "yes" {
            assert_eq!(held, 0, "an HGET found the key held by a read");
            assert!(
                on_io_threads >= hgets,
                "{on_io_threads} of {hgets} on I/O threads"
            );
            assert!(stat(&mut c, "pool_unlocked_reads") >= reads);
        } else {
            assert!(held > 0, "no HGET found the key held by the worker's read");
        }
    }
}
