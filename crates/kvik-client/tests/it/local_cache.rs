//! The opt-in local cache: hot GETs from memory, invalidated by the server's tracking pushes
//! when another client writes, against kvik-server and redis-server alike.

use super::common::*;
use kvik_client::{cmd, Client, Commands, ConnectOptions};
use std::time::{Duration, Instant};

fn until(mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    false
}

fn check(server: Server) {
    let cached = Client::connect(&server.addr(), ConnectOptions::new().local_cache(1000)).unwrap();
    let other = Client::connect(&server.addr(), ConnectOptions::new()).unwrap();
    other.set("k", "v1").unwrap();
    assert_eq!(cached.get("k").unwrap().as_deref(), Some(&b"v1"[..]));
    for _ in 0..100 {
        assert_eq!(cached.get("k").unwrap().as_deref(), Some(&b"v1"[..]));
    }
    let s = cached.local_cache_stats().unwrap();
    assert_eq!((s.hits, s.misses, s.entries), (100, 1, 1));

    // Another client's write reaches the cache.
    other.set("k", "v2").unwrap();
    assert!(until(
        || cached.get("k").unwrap().as_deref() == Some(&b"v2"[..])
    ));
    // Absent keys are cached too, and created ones invalidated.
    assert_eq!(cached.get("absent").unwrap(), None);
    other.set("absent", "now").unwrap();
    assert!(until(|| cached.get("absent").unwrap().is_some()));
    // Own writes are visible at once (no wait for the push).
    cached.set("k", "mine").unwrap();
    assert_eq!(cached.get("k").unwrap().as_deref(), Some(&b"mine"[..]));
    cached.query(&cmd("DEL").arg("k")).unwrap();
    assert_eq!(cached.get("k").unwrap(), None);
    // FLUSHALL from elsewhere empties it.
    cached.get("absent").unwrap();
    other.query(&cmd("FLUSHALL")).unwrap();
    assert!(until(|| cached.get("absent").unwrap().is_none()));
    assert!(cached.local_cache_stats().unwrap().invalidations >= 3);
    // Off by default.
    assert!(other.local_cache_stats().is_none());
}

#[test]
fn local_cache_is_invalidated_by_kvik_server() {
    check(Server::kvik(&[]));
}

#[test]
fn local_cache_is_invalidated_by_redis_server() {
    check(Server::redis(&[]));
}
