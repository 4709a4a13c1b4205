//! Bitmap, HyperLogLog, geo, stream commands and list pushes run to completion on the I/O thread
//! (`CommandSpec::rtc_write`, `rtc_nowait_read`): counted in `rtc_commands` when RocksDB holds
//! their data in memory, the same replies with `rtc-write no`, the pool when a client is
//! blocked on the key or a block is on disk (nothing changed by the attempt).

use crate::common::*;
use redis::{Connection, Value};
use std::io::Write;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(10);

fn hits(con: &mut Connection) -> u64 {
    info_field(con, "stats", "keyspace_hits").expect("INFO has keyspace_hits")
}

/// Runs `cmd` and returns its reply (errors as their text) and how many commands the I/O
/// thread answered meanwhile.
fn run(con: &mut Connection, cmd: &[&str]) -> (String, u64) {
    let before = rtc_commands(con);
    let mut c = redis::cmd(cmd[0]);
    for a in &cmd[1..] {
        c.arg(*a);
    }
    let reply = match c.query::<Value>(con) {
        Ok(v) => format!("{v:?}"),
        Err(e) => format!("error {e}"),
    };
    (reply, rtc_commands(con) - before)
}

/// Data the moved commands work on; not counted. The bitmap is segmented (past the inline
/// limit), so the hot cache never answers its reads.
const SETUP: &[&[&str]] = &[
    &["XGROUP", "CREATE", "s", "g", "0", "MKSTREAM"],
    &["SETBIT", "bm", "200000", "1"],
];

/// Every command moved to the I/O thread, with wrong types and edge arguments.
const MOVED: &[&[&str]] = &[
    &["SETBIT", "bm", "7", "1"],
    &["SETBIT", "bm", "7", "1"],
    &["SETBIT", "fresh", "300000", "1"],
    &["GETBIT", "bm", "7"],
    &["GETBIT", "bm", "999999"],
    &["BITCOUNT", "bm"],
    &["BITCOUNT", "bm", "0", "1000"],
    &["BITCOUNT", "bm", "0", "1000", "BIT"],
    &["BITPOS", "bm", "1"],
    &["BITPOS", "bm", "0", "10"],
    &[
        "BITFIELD", "bm", "INCRBY", "u8", "100", "7", "GET", "u4", "0",
    ],
    &["BITFIELD_RO", "bm", "GET", "u8", "100"],
    &["GETBIT", "s", "1"],
    &["SETBIT", "s", "1", "1"],
    &["PFADD", "h", "a", "b", "c"],
    &["PFADD", "h", "a"],
    &["PFCOUNT", "h"],
    &["PFADD", "h2", "c", "d"],
    &["PFCOUNT", "h", "h2"],
    &["PFCOUNT", "s"],
    &["PFADD", "bm", "x"],
    &["GEOADD", "geo", "13.361389", "38.115556", "Palermo"],
    &[
        "GEOADD",
        "geo",
        "15.087269",
        "37.502669",
        "Catania",
        "1",
        "2",
        "x",
    ],
    &["GEOADD", "geo", "XX", "CH", "13.4", "38.1", "Palermo"],
    &["GEOADD", "geo", "200", "100", "bad"],
    &["GEOPOS", "geo", "Palermo", "nobody"],
    &["GEODIST", "geo", "Palermo", "Catania", "km"],
    &["GEOHASH", "geo", "Catania"],
    &[
        "GEOSEARCH",
        "geo",
        "FROMLONLAT",
        "15",
        "37",
        "BYRADIUS",
        "200",
        "km",
        "ASC",
        "WITHDIST",
    ],
    &[
        "GEOSEARCH",
        "geo",
        "FROMMEMBER",
        "x",
        "BYBOX",
        "9000",
        "9000",
        "km",
        "COUNT",
        "2",
    ],
    &["GEORADIUS_RO", "geo", "15", "37", "100", "km"],
    &["GEORADIUSBYMEMBER_RO", "geo", "Catania", "300", "km"],
    &["GEOPOS", "s", "a"],
    &["ZADD", "z", "1", "a", "2", "b"],
    &["ZADD", "z", "INCR", "5", "a"],
    &["XADD", "s", "1-1", "f", "v"],
    &["XADD", "s", "2-1", "f", "v", "g", "w"],
    &["XADD", "s", "1-0", "f", "v"],
    &["XADD", "s", "MAXLEN", "2", "3-1", "f", "v"],
    &["XADD", "nostream", "NOMKSTREAM", "*", "f", "v"],
    &["XADD", "h", "5-1", "f", "v"],
    &["XLEN", "s"],
    &["XRANGE", "s", "-", "+"],
    &["XREVRANGE", "s", "+", "-", "COUNT", "1"],
    &["XREAD", "COUNT", "1", "STREAMS", "s", "0"],
    &["XREAD", "BLOCK", "10", "STREAMS", "s", "0"],
    &[
        "XREADGROUP",
        "GROUP",
        "g",
        "c1",
        "COUNT",
        "1",
        "STREAMS",
        "s",
        ">",
    ],
    &["XREADGROUP", "GROUP", "g", "c1", "STREAMS", "s", "0"],
    &["XREADGROUP", "GROUP", "nogroup", "c1", "STREAMS", "s", ">"],
    &["XACK", "s", "g", "2-1", "3-1"],
    &["XACK", "s", "g", "0-1"],
    &["LPUSH", "l", "a", "b"],
    &["RPUSH", "l", "c"],
    &["LPUSHX", "l", "d"],
    &["RPUSHX", "nolist", "d"],
    &["LPUSH", "s", "x"],
    &["RPOP", "l"],
    &["LPOP", "l", "2"],
    &["LPOP", "l", "0"],
    &["LPOP", "nolist"],
    &["RPOP", "s"],
];

/// The replies of [`MOVED`] and how many of them the I/O thread answered, each.
fn scenario(c: &mut Connection) -> (Vec<String>, Vec<u64>) {
    for cmd in SETUP {
        let _ = run(c, cmd);
    }
    MOVED.iter().map(|cmd| run(c, cmd)).unzip()
}

#[test]
fn family_commands_run_on_the_io_thread_with_the_same_replies() {
    let s = TestServer::start();
    let mut c = s.client();
    let (on, counted) = scenario(&mut c);
    for (cmd, n) in MOVED.iter().zip(&counted) {
        assert_eq!(*n, 1, "{cmd:?} ran on the I/O thread");
    }
    let _: String = q(&mut c, &["FLUSHALL"]);
    let _: String = q(&mut c, &["CONFIG", "SET", "rtc-write", "no"]);
    let (off, counted) = scenario(&mut c);
    for (cmd, n) in MOVED.iter().zip(&counted) {
        assert_eq!(*n, 0, "{cmd:?} went to the pool with rtc-write no");
    }
    for ((cmd, a), b) in MOVED.iter().zip(&on).zip(&off) {
        assert_eq!(a, b, "{cmd:?}");
    }
    assert!(on.iter().any(|r| r.contains("WRONGTYPE")));
}

/// A write to a key a client is blocked on goes to the pool, which serves that client; the
/// same write to another key stays on the I/O thread.
#[test]
fn a_write_to_a_key_with_blocked_clients_goes_to_the_pool() {
    let s = TestServer::start();
    let mut c = s.client();
    let _: String = q(&mut c, &["XADD", "s", "1-1", "f", "v"]);
    let _: i64 = q(&mut c, &["ZADD", "z", "1", "a"]);
    let mut reader = s.raw();
    reader
        .write_all(&resp_str(&["XREAD", "BLOCK", "0", "STREAMS", "s", "$"]))
        .unwrap();
    let mut popper = s.raw();
    popper
        .write_all(&resp_str(&["BZPOPMIN", "z2", "0"]))
        .unwrap();
    assert!(eventually(WAIT, || info_field(
        &mut c,
        "clients",
        "blocked_clients"
    ) == Some(2)));
    assert_eq!(run(&mut c, &["XADD", "other", "1-1", "f", "v"]).1, 1);
    assert_eq!(run(&mut c, &["XADD", "s", "2-1", "f", "v"]).1, 0);
    let entry = "*1\r\n*2\r\n$1\r\ns\r\n*1\r\n*2\r\n$3\r\n2-1\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n";
    let (got, _) = read_raw(&mut reader, entry.len());
    assert_eq!(String::from_utf8_lossy(&got), entry);
    assert_eq!(run(&mut c, &["ZADD", "z", "2", "b"]).1, 1);
    assert_eq!(run(&mut c, &["GEOADD", "z2", "13.36", "38.11", "p"]).1, 0);
    let popped = "*3\r\n$2\r\nz2\r\n$1\r\np\r\n";
    let (got, _) = read_raw(&mut popper, popped.len());
    assert!(got.starts_with(popped.as_bytes()), "{got:?}");
    let mut list_popper = s.raw();
    list_popper
        .write_all(&resp_str(&["BLPOP", "l", "0"]))
        .unwrap();
    assert!(eventually(WAIT, || info_field(
        &mut c,
        "clients",
        "blocked_clients"
    ) == Some(1)));
    assert_eq!(run(&mut c, &["LPUSH", "other-list", "x"]).1, 1);
    assert_eq!(run(&mut c, &["RPUSH", "l", "e"]).1, 0);
    let popped = "*2\r\n$1\r\nl\r\n$1\r\ne\r\n";
    let (got, _) = read_raw(&mut list_popper, popped.len());
    assert_eq!(String::from_utf8_lossy(&got), popped);
    assert!(eventually(WAIT, || info_field(
        &mut c,
        "clients",
        "blocked_clients"
    ) == Some(0)));
    // Nobody waits any more: the I/O thread runs them again.
    assert_eq!(run(&mut c, &["XADD", "s", "3-1", "f", "v"]).1, 1);
}

/// After a restart the data is on disk and the block cache cold: with `rtc-disk-read no` a
/// command that needs a cold block goes to the pool, its attempt on the I/O thread having
/// changed nothing (each reply is what one run gives) and counted no keyspace lookup; once the
/// blocks are loaded the same commands run on the I/O thread.
#[test]
fn family_commands_with_data_on_disk_fall_back_to_the_pool() {
    let mut s = TestServer::start_with(&["--rtc-disk-read", "no"]);
    let mut c = s.client();
    let _: i64 = q(&mut c, &["SETBIT", "bm", "200000", "1"]);
    let _: i64 = q(&mut c, &["PFADD", "h", "a", "b"]);
    let _: String = q(&mut c, &["XADD", "s", "1-1", "f", "v"]);
    let _: i64 = q(&mut c, &["GEOADD", "geo", "13.36", "38.11", "p"]);
    // Enough other keys that the block of these keys' meta records is not one the restart
    // itself reads (its internal records sort last).
    let mut pipe = redis::pipe();
    for i in 0..3000 {
        pipe.cmd("SET").arg(format!("key:{i}")).arg(i).ignore();
    }
    let _: () = pipe.query(&mut c).unwrap();
    s.restart();
    let mut c = s.client();
    // The bitmap's meta record is in a block nothing has read since the restart.
    let before = hits(&mut c);
    assert_eq!(
        run(&mut c, &["SETBIT", "bm", "200001", "1"]),
        (format!("{:?}", Value::Int(0)), 0),
        "a cold block is read by the pool"
    );
    assert_eq!(hits(&mut c) - before, 0, "SETBIT counts no keyspace lookup");
    let writes: &[(&[&str], Value)] = &[
        (&["PFADD", "h", "c"], Value::Int(1)),
        (
            &["XADD", "s", "2-1", "f", "v"],
            Value::BulkString(b"2-1".to_vec()),
        ),
        (&["GEOADD", "geo", "15.08", "37.50", "q"], Value::Int(1)),
    ];
    for (cmd, want) in writes {
        assert_eq!(run(&mut c, cmd).0, format!("{want:?}"), "{cmd:?}");
    }
    let reads: &[&[&str]] = &[
        &["GETBIT", "bm", "200001"],
        &["BITCOUNT", "bm"],
        &["PFCOUNT", "h"],
        &["XRANGE", "s", "-", "+"],
        &["GEOPOS", "geo", "p"],
    ];
    // A compaction after the restart may rewrite a file whose blocks were just loaded: a read
    // can go to the pool a few times before its blocks stay in memory.
    for cmd in reads {
        let before = hits(&mut c);
        let (first, _) = run(&mut c, cmd);
        let mut runs = 1;
        loop {
            let (reply, n) = run(&mut c, cmd);
            runs += 1;
            assert_eq!(reply, first, "{cmd:?}");
            if n == 1 {
                break;
            }
            assert!(runs < 100, "{cmd:?} never ran on the I/O thread");
        }
        assert_eq!(
            hits(&mut c) - before,
            runs,
            "{cmd:?} counts one hit per run"
        );
    }
}
