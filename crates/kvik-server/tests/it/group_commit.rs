//! Integration tests: group commit. Many writes share one WAL flush, but no reply of a write
//! leaves before the flush that covers it, a pipeline runs as if sent one command at a time, and
//! a kill -9 loses nothing acknowledged with many pipelining writers.

use crate::common::{info_field, read_raw, resp, rtc_commands, Endpoint, TestServer};
use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

fn set_request(key: &str, value: &str) -> Vec<u8> {
    resp(&[b"SET", key.as_bytes(), value.as_bytes()])
}

/// Writes `before` = 1, then stalls every WAL flush (`wal-flush-hold yes`, testing only).
fn hold_wal_flushes_after_a_write(admin: &mut redis::Connection) {
    let _: () = redis::cmd("SET")
        .arg("before")
        .arg("1")
        .query(admin)
        .unwrap();
    set_wal_flush_hold(admin, "yes");
}

fn set_wal_flush_hold(admin: &mut redis::Connection, hold: &str) {
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("wal-flush-hold")
        .arg(hold)
        .query(admin)
        .unwrap();
}

/// `wal-flush-hold yes` stalls every WAL flush: a write's reply must wait for it, in both
/// modes, while reads and commands that wrote nothing still answer.
#[test]
fn no_reply_of_a_write_leaves_before_its_wal_flush() {
    for grouped in ["yes", "no"] {
        let s = TestServer::start_with(&["--group-commit", grouped]);
        let mut admin = s.client();
        hold_wal_flushes_after_a_write(&mut admin);
        let mut writer = s.raw();
        writer
            .set_read_timeout(Some(Duration::from_millis(400)))
            .unwrap();
        writer.write_all(&set_request("k", "v")).unwrap();
        let (early, closed) = read_raw(&mut writer, 5);
        assert!(!closed);
        assert_eq!(
            early, b"",
            "group-commit {grouped}: a write's reply left before its WAL flush"
        );
        // Others are not held: a read, and a command that wrote nothing.
        let before: String = redis::cmd("GET").arg("before").query(&mut admin).unwrap();
        assert_eq!(before, "1");
        let pong: String = redis::cmd("PING").query(&mut admin).unwrap();
        assert_eq!(pong, "PONG");
        set_wal_flush_hold(&mut admin, "no");
        writer
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let (reply, _) = read_raw(&mut writer, 5);
        assert_eq!(reply, b"+OK\r\n", "group-commit {grouped}");
    }
}

/// With `appendfsync always`, the fsync runs on the WAL's sync thread (`fsync-thread`): while
/// it is held, writers' replies wait (their pipelined reads' replies behind them), and their
/// I/O thread, the only one, goes on answering other clients and taking more writes. (With
/// `fsync-thread no` the I/O thread would sit in the held fsync, and the second writer's and
/// the reader's requests would not be answered.)
#[test]
fn an_fsync_on_the_sync_thread_holds_its_replies_and_not_the_io_thread() {
    let s = TestServer::start_with(&["--appendfsync", "always", "--io-threads", "1"]);
    let mut admin = s.client();
    hold_wal_flushes_after_a_write(&mut admin);
    let mut writers: Vec<_> = (0..2).map(|_| s.raw()).collect();
    for (i, w) in writers.iter_mut().enumerate() {
        w.set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        let mut req = set_request(&format!("k{i}"), "v");
        req.extend(resp(&[b"GET", format!("k{i}").as_bytes()]));
        w.write_all(&req).unwrap();
        let (early, closed) = read_raw(w, 5);
        assert!(!closed);
        assert_eq!(early, b"", "writer {i}: a reply left before its fsync");
        let before: String = redis::cmd("GET").arg("before").query(&mut admin).unwrap();
        assert_eq!(before, "1", "the I/O thread answers others meanwhile");
    }
    set_wal_flush_hold(&mut admin, "no");
    for (i, w) in writers.iter_mut().enumerate() {
        w.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let (got, _) = read_raw(w, 12);
        assert_eq!(got, b"+OK\r\n$1\r\nv\r\n", "writer {i}");
    }
}

/// With `appendfsync always`, 1,000 SETs pipelined by four connections share a handful of
/// fsyncs (INFO `kvik_wal_group_commits`), through the sync thread and without it; with group
/// commit off (and the writes on workers, one RocksDB write each) most SETs have their own
/// (a flush covers the writes other workers buffered while it ran: ~730 of 1,000 here).
#[test]
fn pipelined_writes_share_their_fsyncs() {
    let setups = [
        (&["--fsync-thread", "yes"][..], 1..=100),
        (&["--fsync-thread", "no"][..], 1..=100),
        (
            &["--group-commit", "no", "--rtc-write", "no"][..],
            300..=u64::MAX,
        ),
    ];
    for (args, expected) in setups {
        let mut all = vec!["--appendfsync", "always"];
        all.extend_from_slice(args);
        let s = TestServer::start_with(&all);
        let mut admin = s.client();
        let commits = |c: &mut redis::Connection| -> u64 {
            info_field(c, "persistence", "kvik_wal_group_commits").unwrap()
        };
        let before = commits(&mut admin);
        let writers: Vec<_> = (0..4)
            .map(|w| {
                let mut conn = s.raw();
                std::thread::spawn(move || {
                    conn.set_read_timeout(Some(Duration::from_secs(10)))
                        .unwrap();
                    let mut batch = Vec::new();
                    for i in 0..250 {
                        batch.extend(set_request(&format!("w{w}:{i}"), "v"));
                    }
                    conn.write_all(&batch).unwrap();
                    let (got, _) = read_raw(&mut conn, 5 * 250);
                    assert_eq!(got.len(), 5 * 250, "writer {w}: every SET answered");
                })
            })
            .collect();
        for w in writers {
            w.join().unwrap();
        }
        let used = commits(&mut admin) - before;
        assert!(
            expected.contains(&used),
            "{args:?}: 1,000 pipelined SETs took {used} WAL group commits"
        );
        let n: u64 = redis::cmd("DBSIZE").query(&mut admin).unwrap();
        assert_eq!(n, 1000);
    }
}

/// A pipeline mixing writes and reads of the same keys answers what one command at a time does.
#[test]
fn a_pipeline_of_writes_and_reads_of_one_key_runs_in_order() {
    let s = TestServer::start();
    let script: &[&[&str]] = &[
        &["SET", "k", "1"],
        &["INCR", "k"],
        &["GET", "k"],
        &["APPEND", "k", "x"],
        &["GET", "k"],
        &["DEL", "k"],
        &["GET", "k"],
        &["INCRBY", "k", "5"],
        &["RPUSH", "l", "a", "b"],
        &["LPOP", "l"],
        &["LRANGE", "l", "0", "-1"],
        &["HSET", "h", "f", "1"],
        &["HINCRBY", "h", "f", "2"],
        &["HGET", "h", "f"],
        &["MSET", "a", "1", "b", "2"],
        &["MGET", "a", "b", "k"],
        &["EXISTS", "a", "b", "k", "nope"],
    ];
    let mut sequential = s.client();
    let mut one_by_one = Vec::new();
    for args in script {
        let mut c = redis::cmd(args[0]);
        for a in &args[1..] {
            c.arg(*a);
        }
        one_by_one.push(c.query::<redis::Value>(&mut sequential).unwrap());
    }
    let _: () = redis::cmd("FLUSHALL").query(&mut sequential).unwrap();
    let mut pipe = redis::pipe();
    for args in script {
        let mut c = redis::cmd(args[0]);
        for a in &args[1..] {
            c.arg(*a);
        }
        pipe.add_command(c);
    }
    let pipelined: Vec<redis::Value> = pipe.query(&mut s.client()).unwrap();
    assert_eq!(pipelined, one_by_one);
}

/// Several connections pipeline SETs with `appendfsync always` (their writes share flushes)
/// until the server is killed; every acknowledged SET is there after the restart.
#[test]
fn kill9_with_pipelining_writers_loses_nothing_acknowledged() {
    let mut s = TestServer::start_with(&["--appendfsync", "always"]);
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let mut conn = s.raw();
            let stop = stop.clone();
            std::thread::spawn(move || {
                conn.set_read_timeout(Some(Duration::from_secs(10)))
                    .unwrap();
                let mut acked = 0usize;
                let depth = 16;
                while !stop.load(Ordering::SeqCst) {
                    let mut batch = Vec::new();
                    for i in acked..acked + depth {
                        batch.extend(set_request(&format!("w{w}:{i}"), &format!("v{i}")));
                    }
                    if conn.write_all(&batch).is_err() {
                        break;
                    }
                    let mut got = vec![0u8; 5 * depth];
                    let mut filled = 0;
                    while filled < got.len() {
                        match conn.read(&mut got[filled..]) {
                            Ok(0) | Err(_) => break,
                            Ok(n) => filled += n,
                        }
                    }
                    let whole = filled / 5;
                    assert!(got[..whole * 5].chunks(5).all(|r| r == b"+OK\r\n"));
                    acked += whole;
                    if whole < depth {
                        break; // the server died mid-batch
                    }
                }
                (w, acked)
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(1500));
    s.kill9();
    stop.store(true, Ordering::SeqCst);
    let acked: Vec<(usize, usize)> = writers.into_iter().map(|t| t.join().unwrap()).collect();
    assert!(acked.iter().all(|(_, n)| *n > 0), "{acked:?}");
    s.restart();
    let mut c = s.client();
    for (w, n) in acked {
        for i in 0..n {
            let v: Option<String> = redis::cmd("GET")
                .arg(format!("w{w}:{i}"))
                .query(&mut c)
                .unwrap();
            assert_eq!(v, Some(format!("v{i}")), "acknowledged w{w}:{i} lost");
        }
    }
}

/// String, hash and set writes run on the I/O thread (`rtc-write`), with the replies the pool
/// gives; `rtc-write no` sends them to the pool.
#[test]
fn simple_writes_run_to_completion_on_the_io_thread() {
    let script: &[&[&str]] = &[
        &["SET", "s", "1"],
        &["INCRBY", "s", "41"],
        &["APPEND", "s", "!"],
        &["MSET", "m1", "a", "m2", "b"],
        &["HSET", "h", "f", "1", "g", "2"],
        &["HINCRBY", "h", "f", "10"],
        &["HSETNX", "h", "f", "x"],
        &["HDEL", "h", "g", "nope"],
        &["SADD", "set", "a", "b", "c", "a"],
        &["SREM", "set", "b", "zz"],
        &["SET", "s", "x", "GET"],
        &["HSET", "s", "f", "v"],
        &["GET", "s"],
        &["HGETALL", "h"],
        &["SMEMBERS", "set"],
    ];
    let mut replies = Vec::new();
    let mut served = Vec::new();
    for rtc in ["yes", "no"] {
        let s = TestServer::start_with(&["--rtc-write", rtc]);
        let mut c = s.client();
        let before = rtc_commands(&mut c);
        let mut got = Vec::new();
        for args in script {
            let mut cmd = redis::cmd(args[0]);
            for a in &args[1..] {
                cmd.arg(*a);
            }
            got.push(match cmd.query::<redis::Value>(&mut c) {
                Ok(v) => format!("{v:?}"),
                Err(e) => format!("error: {e}"),
            });
        }
        served.push(rtc_commands(&mut c) - before);
        replies.push(got);
    }
    assert_eq!(replies[0], replies[1]);
    // The 12 writes ran on the I/O thread (GET s is a cache hit there too), none without it.
    assert!(served[0] >= 12, "{served:?}");
    assert!(served[1] <= 3, "{served:?}");
}

/// Sets `k:0` .. `k:<keys>` to `value` and restarts `s` (empty hot cache and block cache, the
/// data in SST files); returns a client of the restarted server.
fn set_all_and_restart(s: &mut TestServer, keys: usize, value: &str) -> redis::Connection {
    {
        let mut c = s.client();
        let mut pipe = redis::pipe();
        for i in 0..keys {
            pipe.cmd("SET").arg(format!("k:{i}")).arg(value).ignore();
        }
        pipe.query::<()>(&mut c).unwrap();
    }
    s.restart();
    s.client()
}

/// The same SETs with the I/O thread allowed to read the disk (`rtc-disk-read`, the default;
/// the slow-read limit raised so a loaded machine cannot close the gate): they run to
/// completion there, reading their keys' prior state from the SST files, and none falls back.
#[test]
fn writes_whose_prior_state_is_on_disk_run_on_the_io_thread() {
    const KEYS: usize = 1500;
    let value = "v".repeat(5000);
    let mut s =
        TestServer::start_with(&["--maxmemory", "16mb", "--rtc-disk-read-slow-us", "1000000"]);
    let mut c = set_all_and_restart(&mut s, KEYS, &value);
    let before = rtc_commands(&mut c);
    for i in 0..KEYS {
        let old: String = redis::cmd("SET")
            .arg(format!("k:{i}"))
            .arg(format!("new:{i}"))
            .arg("GET")
            .query(&mut c)
            .unwrap();
        assert_eq!(old, value, "k:{i}");
    }
    let served = rtc_commands(&mut c) - before;
    let fallbacks = info_field(&mut c, "stats", "rtc_fallbacks").unwrap();
    assert!(
        served >= KEYS as u64,
        "{served} of {KEYS} on the I/O thread"
    );
    assert_eq!(fallbacks, 0);
    let now: String = redis::cmd("GET").arg("k:700").query(&mut c).unwrap();
    assert_eq!(now, "new:700");
}

/// SETs of keys whose prior state is on disk only (a restarted server: empty hot cache and
/// block cache; values bigger than a block, so no two keys share one) cannot run on an I/O
/// thread that keeps its reads in memory (`rtc-disk-read no`): each try falls back to the pool. With `rtc-backoff` (the default) the I/O thread
/// soon stops trying and sends them to the pool untried; with `rtc-backoff no` it tries every
/// one. Either way every reply and value is right. Counters, not timings.
#[test]
fn writes_whose_tries_keep_falling_back_stop_being_tried() {
    const KEYS: usize = 1500;
    let value = "v".repeat(5000);
    let dir = tempfile::tempdir().unwrap();
    let mut results = Vec::new();
    for backoff in ["yes", "no"] {
        let mut s = TestServer::start_in(
            dir.path(),
            &[
                "--maxmemory",
                "16mb",
                "--rtc-backoff",
                backoff,
                "--rtc-disk-read",
                "no",
            ],
        );
        let mut c = set_all_and_restart(&mut s, KEYS, &value);
        for i in 0..KEYS {
            let old: String = redis::cmd("SET")
                .arg(format!("k:{i}"))
                .arg(format!("new:{backoff}:{i}"))
                .arg("GET")
                .query(&mut c)
                .unwrap();
            assert_eq!(old.len(), value.len(), "k:{i}");
        }
        for i in (0..KEYS).step_by(97) {
            let now: String = redis::cmd("GET")
                .arg(format!("k:{i}"))
                .query(&mut c)
                .unwrap();
            assert_eq!(now, format!("new:{backoff}:{i}"));
        }
        let fallbacks = info_field(&mut c, "stats", "rtc_fallbacks").unwrap();
        let skips = info_field(&mut c, "stats", "rtc_backoff_skips").unwrap();
        results.push((backoff, fallbacks, skips));
        // Put the values back for the next round.
        let mut pipe = redis::pipe();
        for i in 0..KEYS {
            pipe.cmd("SET").arg(format!("k:{i}")).arg(&value).ignore();
        }
        pipe.query::<()>(&mut c).unwrap();
        s.terminate();
    }
    eprintln!("(rtc-backoff, rtc_fallbacks, rtc_backoff_skips): {results:?}");
    let (_, on_fallbacks, on_skips) = results[0];
    let (_, off_fallbacks, off_skips) = results[1];
    // Without backoff most SETs are tried and fall back; with it most are not tried.
    assert!(off_fallbacks > KEYS as u64 / 2, "{results:?}");
    assert_eq!(off_skips, 0, "{results:?}");
    assert!(on_skips > KEYS as u64 / 2, "{results:?}");
    assert!(on_fallbacks < off_fallbacks / 2, "{results:?}");
}
