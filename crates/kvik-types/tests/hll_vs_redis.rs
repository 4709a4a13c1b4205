//! Differential test of `kvik_types::hll` against redis-server: the same PFADD / PFCOUNT /
//! PFMERGE sequence on both sides must give the same replies and the same stored bytes (GET),
//! through the sparse → dense transition and with several `hll-sparse-max-bytes` settings.

mod common;

use common::*;
use kvik_types::hll;
use rand::Rng;
use std::collections::HashMap;

fn element(rng: &mut impl Rng) -> Vec<u8> {
    let len = rng.gen_range(0..20);
    (0..len).map(|_| rng.gen_range(b'a'..=b'h')).collect()
}

struct Model {
    values: HashMap<String, Vec<u8>>,
    sparse_max: usize,
}

impl Model {
    fn pfadd(&mut self, key: &str, elements: &[Vec<u8>]) -> String {
        let existing = self.values.remove(key);
        match hll::pfadd(
            existing.clone(),
            elements.iter().map(|e| &e[..]),
            self.sparse_max,
        ) {
            Ok((v, changed)) => {
                self.values.insert(key.into(), v);
                (changed as i64).to_string()
            }
            Err(e) => {
                if let Some(v) = existing {
                    self.values.insert(key.into(), v);
                }
                e.to_string()
            }
        }
    }

    fn pfcount(&mut self, keys: &[&str]) -> String {
        if keys.len() == 1 {
            return match self.values.get_mut(keys[0]) {
                None => "0".into(),
                Some(v) => match hll::pfcount(v) {
                    Ok((c, _)) => c.to_string(),
                    Err(e) => e.to_string(),
                },
            };
        }
        let present: Vec<&[u8]> = keys
            .iter()
            .filter_map(|k| self.values.get(*k).map(|v| &v[..]))
            .collect();
        match hll::pfcount_many(present) {
            Ok(c) => c.to_string(),
            Err(e) => e.to_string(),
        }
    }

    fn pfmerge(&mut self, dest: &str, sources: &[&str]) -> String {
        let present: Vec<Vec<u8>> = sources
            .iter()
            .filter_map(|k| self.values.get(*k).cloned())
            .collect();
        let d = self.values.get(dest).cloned();
        match hll::pfmerge(d, present.iter().map(|v| &v[..]), self.sparse_max) {
            Ok(v) => {
                self.values.insert(dest.into(), v);
                "OK".into()
            }
            Err(e) => e.to_string(),
        }
    }
}

fn args<'a>(head: &'a [&'a str], tail: &'a [Vec<u8>]) -> Vec<&'a [u8]> {
    head.iter()
        .map(|s| s.as_bytes())
        .chain(tail.iter().map(|e| &e[..]))
        .collect()
}

#[test]
fn pfadd_pfcount_pfmerge_match_redis_byte_for_byte() {
    let redis = RedisServer::start(&[]);
    let mut con = redis.client();
    let mut rng = rng("hll");
    let keys = ["h0", "h1", "h2", "h3", "h4"];
    let (mut saw_sparse, mut saw_dense) = (false, false);
    for round in 0..6 {
        let sparse_max = [3000usize, 200, 1000, 3000, 50, 6000][round];
        run(&mut con, &[b"FLUSHALL"]);
        let limit = sparse_max.to_string();
        run(
            &mut con,
            &[b"CONFIG", b"SET", b"hll-sparse-max-bytes", limit.as_bytes()],
        );
        let mut model = Model {
            values: HashMap::new(),
            sparse_max,
        };
        for step in 0..300 {
            let op = rng.gen_range(0..10);
            let key = keys[rng.gen_range(0..keys.len())];
            let (expected, got) = if op < 6 {
                // Batches grow with the step so later steps cross into dense.
                let n = rng.gen_range(0..(step * 4 + 2));
                let elements: Vec<Vec<u8>> = (0..n).map(|_| element(&mut rng)).collect();
                let elements: Vec<Vec<u8>> = elements
                    .into_iter()
                    .enumerate()
                    .map(|(i, mut e)| {
                        e.extend_from_slice(format!("{step}:{i}").as_bytes());
                        e
                    })
                    .collect();
                (
                    model.pfadd(key, &elements),
                    run(&mut con, &args(&["PFADD", key], &elements)),
                )
            } else if op < 8 {
                let n = rng.gen_range(1..4);
                let ks: Vec<&str> = (0..n).map(|_| keys[rng.gen_range(0..keys.len())]).collect();
                let mut a: Vec<&[u8]> = vec![b"PFCOUNT"];
                a.extend(ks.iter().map(|k| k.as_bytes()));
                (model.pfcount(&ks), run(&mut con, &a))
            } else {
                let n = rng.gen_range(0..4);
                let ks: Vec<&str> = (0..n).map(|_| keys[rng.gen_range(0..keys.len())]).collect();
                let mut a: Vec<&[u8]> = vec![b"PFMERGE", key.as_bytes()];
                a.extend(ks.iter().map(|k| k.as_bytes()));
                (model.pfmerge(key, &ks), run(&mut con, &a))
            };
            assert_eq!(expected, got, "round {round} step {step} op {op} key {key}");
            for k in keys {
                let theirs = get_bytes(&mut con, k);
                let ours = model.values.get(k).cloned();
                match ours.as_deref().map(hll::validate) {
                    Some(Ok(hll::Encoding::Sparse)) => saw_sparse = true,
                    Some(Ok(hll::Encoding::Dense)) => saw_dense = true,
                    _ => {}
                }
                assert!(
                    theirs == ours,
                    "round {round} step {step}: bytes of {k} differ (redis {:?} bytes, ours {:?})",
                    theirs.as_ref().map(|v| v.len()),
                    ours.as_ref().map(|v| v.len())
                );
            }
        }
    }
    assert!(saw_sparse && saw_dense, "both encodings were exercised");
}

#[test]
fn pfdebug_matches_redis() {
    let redis = RedisServer::start(&[]);
    let mut con = redis.client();
    let mut rng = rng("pfdebug");
    for n in [0usize, 1, 5, 50, 400, 3000] {
        let elements: Vec<Vec<u8>> = (0..n)
            .map(|i| format!("{i}-{}", element(&mut rng).len()).into_bytes())
            .collect();
        let mut args: Vec<&[u8]> = vec![b"PFADD", b"k"];
        args.extend(elements.iter().map(|e| &e[..]));
        run(&mut con, &args);
        let (mut ours, _) = hll::pfadd(None, elements.iter().map(|e| &e[..]), 3000).unwrap();
        let encoding = match hll::validate(&ours).unwrap() {
            hll::Encoding::Sparse => "sparse",
            hll::Encoding::Dense => "dense",
        };
        assert_eq!(run(&mut con, &[b"PFDEBUG", b"ENCODING", b"k"]), encoding);
        let decoded = hll::decode_sparse(&ours)
            .unwrap()
            .unwrap_or_else(|| "ERR HLL encoding is not sparse".into());
        assert_eq!(
            run(&mut con, &[b"PFDEBUG", b"DECODE", b"k"]),
            decoded,
            "{n} elements"
        );
        let regs: Vec<String> = hll::registers(&ours)
            .unwrap()
            .iter()
            .map(|r| r.to_string())
            .collect();
        assert_eq!(
            run(&mut con, &[b"PFDEBUG", b"GETREG", b"k"]),
            format!("[{}]", regs.join(", "))
        );
        hll::to_dense(&mut ours).unwrap();
        assert_eq!(
            get_bytes(&mut con, "k"),
            Some(ours),
            "GETREG leaves the value dense"
        );
        run(&mut con, &[b"DEL", b"k"]);
    }
}

#[test]
fn foreign_and_corrupt_values_give_redis_errors() {
    let redis = RedisServer::start(&[]);
    let mut con = redis.client();
    let mut corrupt = hll::new_sparse();
    corrupt.push(0x80); // one VAL past the 16384 registers
    corrupt[15] |= 0x80;
    let mut dense_short = hll::new_sparse();
    dense_short[4] = 0;
    let cases: Vec<Vec<u8>> = vec![
        b"plain".to_vec(),
        b"HYLL".to_vec(),
        b"12345".to_vec(),
        dense_short,
        corrupt,
    ];
    for value in cases {
        redis::cmd("SET")
            .arg("k")
            .arg(&value)
            .query::<()>(&mut con)
            .unwrap();
        let mut ours = value.clone();
        let expected_count = match hll::pfcount(&mut ours) {
            Ok((c, _)) => c.to_string(),
            Err(e) => e.to_string(),
        };
        assert_eq!(
            expected_count,
            run(&mut con, &[b"PFCOUNT", b"k"]),
            "{value:?}"
        );
        let expected_add = match hll::pfadd(Some(value.clone()), [&b"x"[..]], 3000) {
            Ok((_, c)) => (c as i64).to_string(),
            Err(e) => e.to_string(),
        };
        redis::cmd("SET")
            .arg("k")
            .arg(&value)
            .query::<()>(&mut con)
            .unwrap();
        assert_eq!(
            expected_add,
            run(&mut con, &[b"PFADD", b"k", b"x"]),
            "{value:?}"
        );
        redis::cmd("SET")
            .arg("k")
            .arg(&value)
            .query::<()>(&mut con)
            .unwrap();
        let expected_merge = match hll::pfmerge(None, [&value[..]], 3000) {
            Ok(_) => "OK".to_string(),
            Err(e) => e.to_string(),
        };
        assert_eq!(
            expected_merge,
            run(&mut con, &[b"PFMERGE", b"d", b"k"]),
            "{value:?}"
        );
    }
}
