//! Integration tests: bitmaps (SETBIT ... BITFIELD_RO), HyperLogLog (PFADD ... PFDEBUG) and geo
//! (GEOADD ... GEORADIUSBYMEMBER_RO).
//!
//! A scripted sequence of tricky commands (errors in Redis's order, edge arguments, wrong types)
//! runs on kvik and on a real redis-server and every reply is compared byte for byte, in RESP2
//! and RESP3. The other tests check what makes these values first-class: an HLL and a bitmap
//! are strings (GET, DUMP/RESTORE, RENAME, TTL), a geo index is a sorted set, and the HLL bytes
//! kvik writes are ones redis-server reads.

use crate::common::*;
use kvik_resp::{parse_frame, Limits};
use kvik_testkit::{resp_request, RedisServer};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// A raw connection that returns whole RESP frames as the bytes that came.
struct Raw {
    s: TcpStream,
    buf: Vec<u8>,
}

impl Raw {
    fn new(port: u16, resp3: bool) -> Raw {
        let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut r = Raw { s, buf: Vec::new() };
        if resp3 {
            r.cmd(&["HELLO", "3"]);
        }
        r
    }

    fn cmd(&mut self, args: &[&str]) -> Vec<u8> {
        let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
        self.s.write_all(&resp_request(&a)).unwrap();
        loop {
            if let Ok(Some((_, n))) = parse_frame(&self.buf, &Limits::default()) {
                return self.buf.drain(..n).collect();
            }
            let mut chunk = [0u8; 65536];
            let n = self.s.read(&mut chunk).expect("reply within the timeout");
            assert!(n > 0, "connection closed");
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }
}

/// Commands whose replies must be identical; arguments are split on spaces.
const SCRIPT: &[&str] = &[
    // ---- bitmaps
    "SETBIT b 7 1",
    "SETBIT b 7 0",
    "SETBIT b 100 1",
    "SETBIT b -1 1",
    "SETBIT b abc 1",
    "SETBIT b 1 2",
    "SETBIT b 4294967296 1",
    "SETBIT b 0 x",
    "GET b",
    "STRLEN b",
    "TYPE b",
    "GETBIT b 100",
    "GETBIT b 101",
    "GETBIT b 99999",
    "GETBIT b -1",
    "GETBIT nokey 5",
    "SET s foobar",
    "BITCOUNT s",
    "BITCOUNT s 0 0",
    "BITCOUNT s 1 1",
    "BITCOUNT s 1 1 BYTE",
    "BITCOUNT s 5 30 BIT",
    "BITCOUNT s -2 -1",
    "BITCOUNT s -1 -2 bad",
    "BITCOUNT s 0 1 bad",
    "BITCOUNT s 0",
    "BITCOUNT s a b",
    "BITCOUNT nokey a b",
    "BITPOS s 0",
    "BITPOS s 1",
    "BITPOS s 1 2",
    "BITPOS s 1 2 -1 BYTE",
    "BITPOS s 1 7 15 BIT",
    "BITPOS s 2",
    "BITPOS nokey 0",
    "BITPOS nokey 1",
    "BITPOS nokey 2",
    "BITPOS s 0 1 2 3 4",
    "SET z \u{0}\u{0}",
    "BITPOS z 0",
    "BITPOS z 1",
    "SET ff \u{7f}",
    "BITPOS ff 1 0 -1",
    "BITOP AND dest s b",
    "GET dest",
    "BITOP OR dest s b nokey",
    "GET dest",
    "BITOP XOR dest s s",
    "GET dest",
    "BITOP NOT dest s",
    "GET dest",
    "BITOP NOT dest s b",
    "BITOP NAND dest s",
    "BITOP AND dest nokey nokey2",
    "EXISTS dest",
    "BITFIELD bf SET i8 0 100 GET i8 0 INCRBY i8 0 100",
    "BITFIELD bf OVERFLOW SAT INCRBY i8 0 100 OVERFLOW FAIL INCRBY i8 0 100 GET u4 0",
    "BITFIELD bf INCRBY u2 #3 5 GET u2 #3",
    "BITFIELD bf GET u64 0",
    "BITFIELD bf GET i65 0",
    "BITFIELD bf GET x8 0",
    "BITFIELD bf OVERFLOW NO GET i8 0",
    "BITFIELD bf SET i8 0",
    "BITFIELD bf SET i8 -1 1",
    "BITFIELD bf GET i8 #x",
    "BITFIELD bf",
    "BITFIELD nokey GET i8 0",
    "EXISTS nokey",
    "BITFIELD newkey OVERFLOW FAIL INCRBY u2 10 9",
    "GET newkey",
    "BITFIELD_RO bf GET i8 0 GET u4 4",
    "BITFIELD_RO bf SET i8 0 1",
    "BITFIELD_RO nokey GET u8 0",
    "GET bf",
    "APPEND b xyz",
    "GETBIT b 107",
    "SETRANGE b 1 AB",
    "BITCOUNT b",
    // ---- segmented bitmaps (past 16 KiB): every string command reads them as Redis's string
    "SETBIT small 131071 1",
    "STRLEN small",
    "SETBIT small 131072 1",
    "STRLEN small",
    "GET small",
    "SETBIT seg 131072 1",
    "BITFIELD seg SET u8 #20000 255 GET u16 #9999",
    "GET seg",
    "SETBIT big 300000 1",
    "SETBIT big 7 1",
    "SETBIT big 40000 1",
    "SETBIT big 40000 0",
    "GET big",
    "STRLEN big",
    "TYPE big",
    "OBJECT ENCODING big",
    "BITCOUNT big",
    "BITCOUNT big 1 -1",
    "BITCOUNT big 299000 300001 BIT",
    "BITPOS big 1 1",
    "BITPOS big 0 0 -1",
    "GETBIT big 300000",
    "GETBIT big 300001",
    "GETBIT big 9999999",
    "GETRANGE big 37499 37510",
    "GETRANGE big -3 -1",
    "SETRANGE big 37000 hello",
    "GETRANGE big 36998 37006",
    "BITFIELD big SET u8 #40000 255 GET u16 #20000 INCRBY i32 #5000 -7",
    "BITFIELD big OVERFLOW FAIL INCRBY u8 #40000 1",
    "BITFIELD_RO big GET u8 #40000 GET i32 #5000 GET u4 0",
    "BITOP OR big2 big s",
    "GET big2",
    "BITOP NOT big3 big",
    "BITCOUNT big3",
    "BITOP AND big3 big nokey",
    "GET big3",
    "MGET big big2 nokey s",
    "APPEND big xyz",
    "STRLEN big",
    "GET big",
    "SETBIT big5 150000 1",
    "INCR big5",
    "INCRBYFLOAT big5 1",
    "PFADD big5 a",
    "PFCOUNT big5",
    "LPUSH big5 a",
    "GETDEL big5",
    "EXISTS big5",
    "SETBIT big6 150000 1",
    "GETSET big6 x",
    "GET big6",
    "SETBIT big7 150000 1",
    "SET big7 y GET",
    "SETBIT big8 150000 1",
    "GETEX big8 PERSIST",
    "RENAME big big9",
    "GET big9",
    "COPY big9 big10",
    "BITCOUNT big10",
    "SET big9 plain",
    "GET big9",
    // ---- HyperLogLog
    "PFADD h a b c d e f g",
    "PFADD h a",
    "PFADD h",
    "PFCOUNT h",
    "PFADD h2 x y z a",
    "PFCOUNT h h2",
    "PFCOUNT h nokey",
    "PFCOUNT nokey",
    "PFMERGE h3 h h2",
    "PFCOUNT h3",
    "GET h3",
    "PFMERGE h4",
    "GET h4",
    "PFMERGE h h",
    "PFDEBUG ENCODING h",
    "PFDEBUG DECODE h",
    "PFDEBUG TODENSE h",
    "PFDEBUG TODENSE h",
    "PFDEBUG ENCODING h",
    "PFDEBUG DECODE h",
    "PFCOUNT h",
    "PFDEBUG ENCODING nokey",
    "PFDEBUG NOPE h",
    "PFDEBUG NOPE nokey",
    "PFADD s a",
    "PFCOUNT s",
    "PFCOUNT h s",
    "PFMERGE h s",
    "PFMERGE s h",
    "SET short HYLL",
    "PFCOUNT short",
    "LPUSH list a",
    "PFADD list a",
    "PFCOUNT list",
    "PFCOUNT h list",
    "PFMERGE h list",
    "PFMERGE list h",
    "PFDEBUG ENCODING list",
    // ---- geo
    "GEOADD Sicily 13.361389 38.115556 Palermo 15.087269 37.502669 Catania",
    "GEOADD Sicily NX 13.361389 38.115556 Palermo 12.5 37.8 Marsala",
    "GEOADD Sicily XX CH 13.4 38.1 Palermo 14 37 Nowhere",
    "GEOADD Sicily NX XX 13 38 x",
    "GEOADD Sicily 13 38",
    "GEOADD Sicily 200 38 x",
    "GEOADD Sicily 13 86 x",
    "GEOADD Sicily abc 38 x",
    "GEOADD Sicily GT 13 38 x",
    "ZRANGE Sicily 0 -1 WITHSCORES",
    "TYPE Sicily",
    "GEOPOS Sicily Palermo Catania NonExisting",
    "GEOPOS nokey a b",
    "GEOPOS Sicily",
    "GEODIST Sicily Palermo Catania",
    "GEODIST Sicily Palermo Catania km",
    "GEODIST Sicily Palermo Catania mi",
    "GEODIST Sicily Palermo Catania FT",
    "GEODIST Sicily Palermo Catania yd",
    "GEODIST Sicily Palermo Nope",
    "GEODIST nokey a b",
    "GEODIST Sicily Palermo Catania km extra",
    "GEOHASH Sicily Palermo Catania Nope",
    "GEOHASH nokey a",
    "GEORADIUS Sicily 15 37 200 km WITHDIST",
    "GEORADIUS Sicily 15 37 200 km WITHCOORD WITHDIST WITHHASH ASC",
    "GEORADIUS Sicily 15 37 200 km DESC COUNT 1",
    "GEORADIUS Sicily 15 37 200 km COUNT 0",
    "GEORADIUS Sicily 15 37 200 km COUNT x",
    "GEORADIUS Sicily 15 37 200 km ANY",
    "GEORADIUS Sicily 15 37 200 km COUNT 1 ANY",
    "GEORADIUS Sicily 15 37 -1 km",
    "GEORADIUS Sicily 15 37 x km",
    "GEORADIUS Sicily 15 37 10 yd",
    "GEORADIUS Sicily 15 37 200 km STORE dst",
    "ZRANGE dst 0 -1 WITHSCORES",
    "GEORADIUS Sicily 15 37 200 km STOREDIST dst2",
    "ZRANGE dst2 0 -1 WITHSCORES",
    "GEORADIUS Sicily 15 37 200 km STORE dst WITHDIST",
    "GEORADIUS Sicily 15 37 1 m STORE dst",
    "EXISTS dst",
    "GEORADIUS nokey 15 37 200 km STORE dst2",
    "EXISTS dst2",
    "GEORADIUS nokey 15 37 200 km",
    "GEORADIUS_RO Sicily 15 37 200 km WITHDIST ASC",
    "GEORADIUS_RO Sicily 15 37 200 km STORE dst",
    "GEORADIUSBYMEMBER Sicily Palermo 200 km WITHDIST ASC",
    "GEORADIUSBYMEMBER Sicily Nope 200 km",
    "GEORADIUSBYMEMBER nokey Nope 200 yd",
    "GEORADIUSBYMEMBER Sicily Palermo 200 km STORE dst",
    "GEORADIUSBYMEMBER_RO Sicily Palermo 100 mi WITHCOORD",
    "GEOSEARCH Sicily FROMLONLAT 15 37 BYRADIUS 200 km ASC WITHDIST WITHCOORD WITHHASH",
    "GEOSEARCH Sicily FROMLONLAT 15 37 BYBOX 400 400 km ASC WITHDIST",
    "GEOSEARCH Sicily FROMMEMBER Palermo BYBOX 100 100 km DESC",
    "GEOSEARCH Sicily FROMMEMBER Nope BYRADIUS 1 km",
    "GEOSEARCH nokey FROMMEMBER Nope BYRADIUS 1 km",
    "GEOSEARCH Sicily FROMMEMBER Palermo FROMLONLAT 15 37 BYRADIUS 1 km",
    "GEOSEARCH Sicily FROMLONLAT 15 37 BYRADIUS 1 km BYBOX 1 1 km",
    "GEOSEARCH Sicily BYRADIUS 1 km ASC WITHDIST",
    "GEOSEARCH Sicily FROMLONLAT 15 37 ASC WITHDIST",
    "GEOSEARCH Sicily FROMLONLAT 15 37 BYBOX -1 1 km",
    "GEOSEARCH Sicily FROMLONLAT 15 37 BYBOX x 1 km",
    "GEOSEARCH Sicily FROMLONLAT 15 37 BYBOX 1 y km",
    "GEOSEARCH Sicily FROMLONLAT 15 37 BYRADIUS 200 km STORE dst",
    "GEOSEARCH Sicily FROMLONLAT 15 37 BYRADIUS 200 km COUNT 1 ANY",
    "GEOSEARCHSTORE dst Sicily FROMLONLAT 15 37 BYRADIUS 200 km",
    "ZRANGE dst 0 -1 WITHSCORES",
    "GEOSEARCHSTORE dst Sicily FROMLONLAT 15 37 BYRADIUS 200 km STOREDIST DESC COUNT 2",
    "ZRANGE dst 0 -1 WITHSCORES",
    "GEOSEARCHSTORE dst Sicily FROMLONLAT 15 37 BYRADIUS 200 km WITHDIST",
    "GEOSEARCHSTORE dst nokey FROMLONLAT 15 37 BYRADIUS 200 km",
    "EXISTS dst",
    "GEOADD b 13 38 x",
    "GEOPOS b x",
    "GEOSEARCH b FROMLONLAT 15 37 BYRADIUS 200 km",
    "GEOSEARCHSTORE dst b FROMLONLAT 15 37 BYRADIUS 200 km",
    // ---- key positions (cluster routing, EXEC's locks)
    "COMMAND GETKEYS BITOP AND dest a b",
    "COMMAND GETKEYS BITFIELD_RO k GET u8 0",
    "COMMAND GETKEYS PFMERGE a b c",
    "COMMAND GETKEYS PFCOUNT a b",
    "COMMAND GETKEYS PFDEBUG GETREG k",
    "COMMAND GETKEYS GEORADIUS k 1 2 3 m STORE dst",
    "COMMAND GETKEYS GEORADIUS k 1 2 3 m STORE dst STOREDIST dst2",
    "COMMAND GETKEYS GEORADIUSBYMEMBER k m 3 km",
    "COMMAND GETKEYS GEOSEARCHSTORE d s FROMLONLAT 1 2 BYRADIUS 1 m",
    "GEOADD world -180 -85.05112878 sw 180 85.05112878 ne 0 0 origin",
    "GEOHASH world sw ne origin",
    "GEOPOS world sw ne origin",
    "GEOSEARCH world FROMLONLAT 0 0 BYRADIUS 20000 km ASC WITHDIST",
    "GEOSEARCH world FROMLONLAT 179 85 BYBOX 1000 1000 km WITHCOORD",
];

#[test]
fn scripted_replies_match_redis_byte_for_byte() {
    let redis = RedisServer::start(&[]);
    let kvik = TestServer::start();
    for resp3 in [false, true] {
        let mut a = Raw::new(redis.port(), resp3);
        let mut b = Raw::new(kvik.port(), resp3);
        a.cmd(&["FLUSHALL"]);
        b.cmd(&["FLUSHALL"]);
        for line in SCRIPT {
            let args: Vec<&str> = line.split(' ').collect();
            let (ra, rb) = (a.cmd(&args), b.cmd(&args));
            assert_eq!(
                String::from_utf8_lossy(&rb),
                String::from_utf8_lossy(&ra),
                "{line} (resp3: {resp3})"
            );
        }
    }
}

#[test]
fn hll_values_are_redis_strings_both_ways() {
    let redis = RedisServer::start(&[]);
    let kvik = TestServer::start();
    let mut r = redis.client();
    let mut k = kvik.client();
    // Sparse, then dense (past hll-sparse-max-bytes), built on kvik and counted by Redis.
    for n in [10usize, 200, 5000] {
        let elements: Vec<String> = (0..n).map(|i| format!("e{i}")).collect();
        for chunk in elements.chunks(500) {
            let mut c = redis::cmd("PFADD");
            c.arg("h");
            for e in chunk {
                c.arg(e);
            }
            let _: i64 = c.query(&mut k).unwrap();
            let _: i64 = c.query(&mut r).unwrap();
        }
        let count: i64 = q(&mut k, &["PFCOUNT", "h"]);
        assert_eq!(count, q::<i64>(&mut r, &["PFCOUNT", "h"]), "{n}");
        let ours = get_bytes(&mut k, "h");
        assert_eq!(ours, get_bytes(&mut r, "h"), "{n} elements: same bytes");
        redis::cmd("SET")
            .arg("copy")
            .arg(&ours)
            .query::<()>(&mut r)
            .unwrap();
        assert_eq!(count, q::<i64>(&mut r, &["PFCOUNT", "copy"]), "{n}");
        // And back: Redis's value (its cache now fresh) works on kvik.
        let theirs = get_bytes(&mut r, "copy");
        redis::cmd("SET")
            .arg("back")
            .arg(&theirs)
            .query::<()>(&mut k)
            .unwrap();
        assert_eq!(q::<i64>(&mut k, &["PFCOUNT", "back"]), count);
    }
    // DUMP / RESTORE and RENAME carry it as the string it is; PFADD keeps the TTL.
    let dump: Vec<u8> = redis::cmd("DUMP").arg("h").query(&mut k).unwrap();
    redis::cmd("RESTORE")
        .arg("restored")
        .arg(0)
        .arg(&dump)
        .query::<()>(&mut k)
        .unwrap();
    assert_eq!(
        q::<i64>(&mut k, &["PFCOUNT", "restored"]),
        q::<i64>(&mut k, &["PFCOUNT", "h"])
    );
    q::<()>(&mut k, &["RENAME", "restored", "renamed"]);
    q::<i64>(&mut k, &["EXPIRE", "renamed", "1000"]);
    q::<i64>(&mut k, &["PFADD", "renamed", "new-element"]);
    assert!(q::<i64>(&mut k, &["TTL", "renamed"]) > 0);
    assert_eq!(q::<String>(&mut k, &["TYPE", "renamed"]), "string");
}

#[test]
fn pfcount_writes_its_cache_back_and_touches_watchers_only_then() {
    let srv = TestServer::start();
    let mut c = srv.client();
    let mut other = srv.client();
    q::<i64>(&mut c, &["PFADD", "h", "a", "b", "c"]);
    // The cache is stale after PFADD: PFCOUNT writes it, which a WATCH sees (as in Redis).
    q::<()>(&mut c, &["WATCH", "h"]);
    assert_eq!(q::<i64>(&mut other, &["PFCOUNT", "h"]), 3);
    q::<()>(&mut c, &["MULTI"]);
    q::<()>(&mut c, &["PING"]);
    assert_eq!(qv(&mut c, &["EXEC"]), redis::Value::Nil);
    // Now fresh: counting again changes nothing.
    q::<()>(&mut c, &["WATCH", "h"]);
    assert_eq!(q::<i64>(&mut other, &["PFCOUNT", "h"]), 3);
    q::<()>(&mut c, &["MULTI"]);
    q::<()>(&mut c, &["PING"]);
    assert_ne!(qv(&mut c, &["EXEC"]), redis::Value::Nil);
    // A PFADD that changes no register does not write either.
    q::<()>(&mut c, &["WATCH", "h"]);
    assert_eq!(q::<i64>(&mut other, &["PFADD", "h", "a"]), 0);
    q::<()>(&mut c, &["MULTI"]);
    q::<()>(&mut c, &["PING"]);
    assert_ne!(qv(&mut c, &["EXEC"]), redis::Value::Nil);
    assert_eq!(q::<String>(&mut c, &["PFSELFTEST"]), "OK");
}

#[test]
fn a_geo_index_is_a_sorted_set() {
    let srv = TestServer::start();
    let mut c = srv.client();
    let added: i64 = q(
        &mut c,
        &[
            "GEOADD",
            "g",
            "13.361389",
            "38.115556",
            "Palermo",
            "15.087269",
            "37.502669",
            "Catania",
        ],
    );
    assert_eq!(added, 2);
    assert_eq!(q::<String>(&mut c, &["TYPE", "g"]), "zset");
    assert_eq!(q::<i64>(&mut c, &["ZCARD", "g"]), 2);
    assert_eq!(
        q::<String>(&mut c, &["ZSCORE", "g", "Palermo"]),
        "3479099956230698"
    );
    assert_eq!(
        q::<String>(&mut c, &["OBJECT", "ENCODING", "g"]),
        "listpack"
    );
    // Copies and renames keep it searchable; ZREM removes a place.
    q::<i64>(&mut c, &["COPY", "g", "g2"]);
    q::<()>(&mut c, &["RENAME", "g2", "g3"]);
    let near: Vec<String> = q(
        &mut c,
        &[
            "GEOSEARCH",
            "g3",
            "FROMLONLAT",
            "15",
            "37",
            "BYRADIUS",
            "200",
            "km",
            "ASC",
        ],
    );
    assert_eq!(near, ["Catania", "Palermo"]);
    q::<i64>(&mut c, &["ZREM", "g3", "Catania"]);
    let near: Vec<String> = q(&mut c, &["GEORADIUS_RO", "g3", "15", "37", "200", "km"]);
    assert_eq!(near, ["Palermo"]);
    assert_eq!(
        q::<String>(&mut c, &["GEODIST", "g", "Palermo", "Catania", "km"]),
        "166.2742"
    );
    // A STORE writes a new sorted set at the destination, replacing whatever it held.
    q::<()>(&mut c, &["SET", "dst", "x"]);
    let stored: i64 = q(
        &mut c,
        &[
            "GEOSEARCHSTORE",
            "dst",
            "g",
            "FROMMEMBER",
            "Palermo",
            "BYRADIUS",
            "1",
            "km",
        ],
    );
    assert_eq!(stored, 1);
    assert_eq!(q::<String>(&mut c, &["TYPE", "dst"]), "zset");
}

#[test]
fn setbit_far_out_writes_one_segment_and_del_is_constant() {
    let srv = TestServer::start();
    let mut c = srv.client();
    assert_eq!(q::<i64>(&mut c, &["SETBIT", "big", "4294967295", "1"]), 0);
    assert_eq!(q::<i64>(&mut c, &["GETBIT", "big", "4294967295"]), 1);
    assert_eq!(q::<i64>(&mut c, &["GETBIT", "big", "4294967294"]), 0);
    assert_eq!(q::<i64>(&mut c, &["STRLEN", "big"]), 1 << 29);
    assert_eq!(q::<String>(&mut c, &["TYPE", "big"]), "string");
    assert_eq!(q::<i64>(&mut c, &["BITCOUNT", "big"]), 1);
    assert_eq!(q::<i64>(&mut c, &["BITPOS", "big", "1"]), 4294967295);
    assert_eq!(q::<i64>(&mut c, &["SETBIT", "big", "0", "1"]), 0);
    // What is stored is two segments and the meta record: DUMP exports exactly that
    // (type-blind), a few KiB instead of 512 MB.
    let dump: Vec<u8> = redis::cmd("DUMP").arg("big").query(&mut c).unwrap();
    assert!(dump.len() < 3 * 4096, "DUMP is {} bytes", dump.len());
    // RESTORE, COPY and RENAME carry the segments; each copy reads the same.
    redis::cmd("RESTORE")
        .arg("restored")
        .arg(0)
        .arg(&dump)
        .query::<()>(&mut c)
        .unwrap();
    q::<i64>(&mut c, &["COPY", "restored", "copied"]);
    q::<()>(&mut c, &["RENAME", "copied", "renamed"]);
    for key in ["restored", "renamed"] {
        assert_eq!(q::<i64>(&mut c, &["BITCOUNT", key]), 2, "{key}");
        assert_eq!(q::<i64>(&mut c, &["GETBIT", key, "4294967295"]), 1, "{key}");
        assert_eq!(q::<i64>(&mut c, &["STRLEN", key]), 1 << 29, "{key}");
    }
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 3);
    // DEL replaces the meta record only (the segments are garbage of a dead version).
    assert_eq!(q::<i64>(&mut c, &["DEL", "big", "restored", "renamed"]), 3);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "big"]), 0);
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 0);
    // A new bitmap under the same name does not see the old segments.
    assert_eq!(q::<i64>(&mut c, &["SETBIT", "big", "4294967295", "0"]), 0);
    assert_eq!(q::<i64>(&mut c, &["BITCOUNT", "big"]), 0);
}

#[test]
fn segmented_bitmaps_expire_and_touch_watchers() {
    let srv = TestServer::start();
    let mut c = srv.client();
    let mut other = srv.client();
    q::<i64>(&mut c, &["SETBIT", "b", "1000000", "1"]);
    q::<i64>(&mut c, &["EXPIRE", "b", "1000"]);
    q::<i64>(&mut c, &["SETBIT", "b", "5", "1"]);
    assert!(q::<i64>(&mut c, &["TTL", "b"]) > 0, "SETBIT keeps the TTL");
    q::<()>(&mut c, &["WATCH", "b"]);
    q::<i64>(&mut other, &["SETBIT", "b", "6", "1"]);
    q::<()>(&mut c, &["MULTI"]);
    q::<()>(&mut c, &["PING"]);
    assert_eq!(
        qv(&mut c, &["EXEC"]),
        redis::Value::Nil,
        "WATCH saw the SETBIT"
    );
    q::<i64>(&mut c, &["PEXPIRE", "b", "50"]);
    assert!(eventually(Duration::from_secs(10), || {
        q::<i64>(&mut c, &["EXISTS", "b"]) == 0
    }));
    assert_eq!(q::<i64>(&mut c, &["BITCOUNT", "b"]), 0);
    let scanned: (String, Vec<String>) = q(&mut c, &["SCAN", "0", "TYPE", "string"]);
    assert!(scanned.1.is_empty());
    q::<i64>(&mut c, &["SETBIT", "b2", "1000000", "1"]);
    let scanned: (String, Vec<String>) = q(&mut c, &["SCAN", "0", "TYPE", "string"]);
    assert_eq!(scanned.1, ["b2"]);
}

#[test]
fn bitmaps_are_strings_to_every_string_command() {
    let srv = TestServer::start();
    let mut c = srv.client();
    assert_eq!(q::<i64>(&mut c, &["SETBIT", "b", "7", "1"]), 0);
    assert_eq!(q::<i64>(&mut c, &["SETBIT", "b", "15", "1"]), 0);
    assert_eq!(get_bytes(&mut c, "b"), b"\x01\x01");
    assert_eq!(q::<String>(&mut c, &["TYPE", "b"]), "string");
    q::<i64>(&mut c, &["EXPIRE", "b", "1000"]);
    q::<i64>(&mut c, &["SETBIT", "b", "23", "1"]);
    assert!(q::<i64>(&mut c, &["TTL", "b"]) > 0, "SETBIT keeps the TTL");
    assert_eq!(q::<i64>(&mut c, &["APPEND", "b", "A"]), 4);
    assert_eq!(q::<i64>(&mut c, &["BITCOUNT", "b"]), 5);
    assert_eq!(q::<i64>(&mut c, &["GETBIT", "b", "25"]), 1);
    // The cached copy follows the writes (GETBIT, BITCOUNT may be answered from the cache).
    for i in 0..20 {
        q::<i64>(&mut c, &["SETBIT", "b", &(40 + i).to_string(), "1"]);
        assert_eq!(q::<i64>(&mut c, &["BITCOUNT", "b"]), 6 + i);
        assert_eq!(q::<i64>(&mut c, &["GETBIT", "b", &(40 + i).to_string()]), 1);
    }
    assert_eq!(q::<i64>(&mut c, &["BITOP", "NOT", "n", "b"]), 8);
    assert_eq!(
        q::<i64>(&mut c, &["TTL", "n"]),
        -1,
        "BITOP's result has no TTL"
    );
    q::<()>(&mut c, &["RENAME", "b", "b2"]);
    assert_eq!(q::<i64>(&mut c, &["BITCOUNT", "b2"]), 25);
}

/// Commands of the three families whose keyspace events (and silences) must be Redis's.
const EVENT_STEPS: &[&[&str]] = &[
    &["SETBIT", "b", "7", "1"],
    &["SETBIT", "b", "7", "1"],
    &["SETBIT", "b", "x", "1"],
    &["SETBIT", "big", "200000", "1"],
    &["BITFIELD", "b", "SET", "u8", "0", "1"],
    &["BITFIELD", "b", "GET", "u8", "0"],
    &[
        "BITFIELD", "nb", "OVERFLOW", "FAIL", "INCRBY", "u2", "0", "9",
    ],
    &["BITOP", "OR", "d", "b", "big"],
    &["BITOP", "AND", "d", "nokey"],
    &["BITOP", "AND", "d", "nokey"],
    &["PFADD", "h", "a", "b"],
    &["PFADD", "h", "a"],
    &["PFCOUNT", "h"],
    &["PFMERGE", "h2", "h"],
    &["PFDEBUG", "TODENSE", "h"],
    &["GEOADD", "g", "13", "38", "a", "14", "37", "b"],
    &["GEOADD", "g", "XX", "13", "38", "a"],
    &[
        "GEOSEARCHSTORE",
        "gs",
        "g",
        "FROMLONLAT",
        "13",
        "38",
        "BYRADIUS",
        "500",
        "km",
    ],
    &[
        "GEOSEARCHSTORE",
        "gs",
        "g",
        "FROMLONLAT",
        "100",
        "0",
        "BYRADIUS",
        "1",
        "km",
    ],
    &["GEORADIUS", "g", "13", "38", "500", "km", "STORE", "gr"],
    &[
        "GEORADIUSBYMEMBER",
        "g",
        "a",
        "500",
        "km",
        "STOREDIST",
        "gr",
    ],
    &["GEORADIUS", "nokey", "13", "38", "500", "km", "STORE", "gr"],
];

#[test]
fn keyspace_events_match_redis() {
    let kvik = TestServer::start();
    let redis = RedisServer::start(&[]);
    for flags in ["KEA", "Kgn", "E$z"] {
        let k = crate::pubsub::keyspace_events(kvik.port(), EVENT_STEPS, flags);
        let r = crate::pubsub::keyspace_events(redis.port(), EVENT_STEPS, flags);
        assert_eq!(k, r, "flags {flags}");
    }
}
