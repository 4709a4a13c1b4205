//! Blocked clients served after their key was created by RENAME, MOVE, COPY, SORT STORE or a
//! transaction that makes several of their keys ready: the element each gets, the reply and the
//! keys left behind are compared with a real redis-server.

use super::common::*;
use kvik_testkit::{connect, connect_raw, RedisServer};
use std::io::Write;
use std::time::Duration;

/// Blocks a client with `block`, runs `setup` from another, and returns what the blocked client
/// got and what is left in `dst` / `zdst`.
fn scenario(port: u16, block: &[&str], setup: &[&[&str]]) -> (Vec<u8>, redis::Value, redis::Value) {
    let mut c = connect(port);
    q::<()>(&mut c, &["FLUSHALL"]);
    let mut blocked = connect_raw(port);
    blocked.write_all(&resp_str(block)).unwrap();
    assert!(eventually(Duration::from_secs(10), || {
        info_field(&mut c, "clients", "blocked_clients") == Some(1)
    }));
    for args in setup {
        let _: redis::Value = q(&mut c, args);
    }
    blocked
        .set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let (got, _) = read_raw(&mut blocked, 1 << 16);
    let _: redis::Value = q(&mut c, &["SELECT", "0"]);
    (
        got,
        q(&mut c, &["LRANGE", "dst", "0", "-1"]),
        q(&mut c, &["ZRANGE", "zdst", "0", "-1"]),
    )
}

#[test]
fn keys_created_by_rename_move_copy_and_sort_store_serve_waiters_as_redis() {
    let cases: &[(&[&str], &[&[&str]])] = &[
        (
            &["BLPOP", "dst", "0"],
            &[&["RPUSH", "src", "a", "b", "c"], &["RENAME", "src", "dst"]],
        ),
        (
            &["BRPOP", "dst", "0"],
            &[&["RPUSH", "src", "a", "b", "c"], &["RENAME", "src", "dst"]],
        ),
        (
            &["BLMPOP", "0", "1", "dst", "RIGHT", "COUNT", "2"],
            &[&["RPUSH", "src", "a", "b", "c"], &["RENAME", "src", "dst"]],
        ),
        (
            &["BLPOP", "dst", "0"],
            &[&["RPUSH", "src", "a", "b"], &["RENAMENX", "src", "dst"]],
        ),
        (
            &["BLPOP", "dst", "0"],
            &[
                &["SELECT", "1"],
                &["RPUSH", "dst", "a", "b", "c"],
                &["MOVE", "dst", "0"],
            ],
        ),
        (
            &["BLPOP", "dst", "0"],
            &[
                &["RPUSH", "src", "3", "1", "2"],
                &["SORT", "src", "STORE", "dst"],
            ],
        ),
        (
            &["BLMPOP", "0", "1", "dst", "LEFT"],
            &[
                &["RPUSH", "src", "3", "1", "2"],
                &["SORT", "src", "DESC", "STORE", "dst"],
            ],
        ),
        (
            &["BLPOP", "dst", "0"],
            &[&["RPUSH", "src", "a", "b"], &["COPY", "src", "dst"]],
        ),
        (
            &["BZPOPMIN", "zdst", "0"],
            &[
                &["ZADD", "src", "1", "a", "2", "b"],
                &["RENAME", "src", "zdst"],
            ],
        ),
        (
            &["BLMOVE", "dst", "other", "RIGHT", "LEFT", "0"],
            &[&["RPUSH", "src", "a", "b"], &["RENAME", "src", "dst"]],
        ),
        // Two of the waiter's keys made ready by one transaction: served from the one that was
        // written first, whatever their order in the command.
        (
            &["BLPOP", "k1", "dst", "0"],
            &[
                &["RPUSH", "src", "a", "b"],
                &["MULTI"],
                &["RENAME", "src", "dst"],
                &["RPUSH", "k1", "x"],
                &["EXEC"],
            ],
        ),
        (
            &["BLPOP", "k1", "dst", "0"],
            &[
                &["RPUSH", "src", "a", "b"],
                &["MULTI"],
                &["RPUSH", "k1", "x"],
                &["RENAME", "src", "dst"],
                &["EXEC"],
            ],
        ),
        (
            &["BLMPOP", "0", "2", "k1", "dst", "LEFT"],
            &[
                &["RPUSH", "src", "a", "b"],
                &["MULTI"],
                &["RENAME", "src", "dst"],
                &["RPUSH", "k1", "x"],
                &["EXEC"],
            ],
        ),
        (
            &["BZPOPMAX", "k1", "zdst", "0"],
            &[
                &["ZADD", "src", "1", "a"],
                &["MULTI"],
                &["RENAME", "src", "zdst"],
                &["ZADD", "k1", "5", "x"],
                &["EXEC"],
            ],
        ),
    ];
    let kvik = TestServer::start();
    let redis = RedisServer::start(&[]);
    for (block, setup) in cases {
        let a = scenario(kvik.port, block, setup);
        let b = scenario(redis.port, block, setup);
        assert_eq!(a, b, "{block:?} after {setup:?}");
    }
}
