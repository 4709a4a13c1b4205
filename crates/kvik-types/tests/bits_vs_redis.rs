//! Differential test of `kvik_types::bits` against redis-server: random SET / SETBIT / GETBIT /
//! BITCOUNT / BITPOS / BITOP / BITFIELD / BITFIELD_RO sequences, with edge and invalid
//! arguments, must give the same replies and leave the same bytes (GET) as Redis. The model
//! below is the command layer the server will have: lookup and parse in Redis's order, then the
//! crate's algorithms; every value is also kept in a segmented store to check the trait path.

mod common;

use common::*;
use kvik_types::bits::{
    self, count, field, op, store::Segmented, BitError, BitRead, BitWrite, DEFAULT_MAX_BYTES,
};
use rand::seq::SliceRandom;
use rand::Rng;
use std::collections::HashMap;

const KEYS: [&str; 4] = ["b0", "b1", "b2", "b3"];

#[derive(Default)]
struct Model {
    values: HashMap<String, Vec<u8>>,
    segmented: HashMap<String, Segmented>,
}

fn ints(v: &[Option<i64>]) -> String {
    let parts: Vec<String> = v
        .iter()
        .map(|x| x.map_or("(nil)".to_string(), |n| n.to_string()))
        .collect();
    format!("[{}]", parts.join(", "))
}

fn text(a: &[u8]) -> &str {
    std::str::from_utf8(a).unwrap()
}

impl Model {
    fn store(&mut self, key: &str, v: Vec<u8>) {
        let mut seg = Segmented::new(5);
        seg.grow_to(v.len() as u64);
        for (i, &b) in v.iter().enumerate() {
            if b != 0 {
                seg.write_at(i as u64, &[b]);
            }
        }
        self.segmented.insert(key.into(), seg);
        self.values.insert(key.into(), v);
    }

    fn exec(&mut self, args: &[Vec<u8>]) -> String {
        let name = text(&args[0]).to_ascii_uppercase();
        let key = text(&args[1]).to_string();
        let rest: Vec<&[u8]> = args[2..].iter().map(|a| &a[..]).collect();
        let result: Result<String, BitError> = (|| match name.as_str() {
            "SET" => {
                self.store(&key, rest[0].to_vec());
                Ok("OK".into())
            }
            "GETBIT" => {
                let offset = bits::parse_offset(rest[0], None, DEFAULT_MAX_BYTES)?;
                let empty = Vec::new();
                let v = self.values.get(&key).unwrap_or(&empty);
                let bit = bits::getbit(v, offset);
                if let Some(seg) = self.segmented.get(&key) {
                    assert_eq!(bits::getbit(seg, offset), bit);
                }
                Ok(bit.to_string())
            }
            "SETBIT" => {
                let offset = bits::parse_offset(rest[0], None, DEFAULT_MAX_BYTES)?;
                let on = bits::parse_bit_value(rest[1])?;
                let mut v = self.values.get(&key).cloned().unwrap_or_default();
                let mut seg = self
                    .segmented
                    .get(&key)
                    .cloned()
                    .unwrap_or_else(|| Segmented::new(5));
                let old = bits::setbit(&mut v, offset, on);
                assert_eq!(bits::setbit(&mut seg, offset, on), old);
                assert_eq!(seg.to_vec(), v);
                self.values.insert(key.clone(), v);
                self.segmented.insert(key, seg);
                Ok(old.to_string())
            }
            "BITCOUNT" => {
                let Some(v) = self.values.get(&key) else {
                    return Ok("0".into());
                };
                let range = count::parse_bitcount_args(&rest)?;
                let n = count::bitcount(v, range);
                assert_eq!(count::bitcount(&self.segmented[&key], range), n);
                Ok(n.to_string())
            }
            "BITPOS" => {
                let bit = count::parse_bitpos_bit(rest[0])?;
                let Some(v) = self.values.get(&key) else {
                    return Ok(count::bitpos_missing(bit).to_string());
                };
                let range = count::parse_bitpos_args(&rest[1..])?;
                let p = count::bitpos(v, bit, range);
                assert_eq!(count::bitpos(&self.segmented[&key], bit, range), p);
                Ok(p.to_string())
            }
            "BITOP" => {
                let dest = text(rest[0]).to_string();
                let op = op::parse_bitop(&args[1], rest.len() - 1)?;
                let empty = Vec::new();
                let sources: Vec<&dyn BitRead> = rest[1..]
                    .iter()
                    .map(|k| self.values.get(text(k)).unwrap_or(&empty) as &dyn BitRead)
                    .collect();
                let result = op::bitop_to_vec(op, &sources);
                let segs: Vec<&dyn BitRead> = rest[1..]
                    .iter()
                    .map(|k| match self.segmented.get(text(k)) {
                        Some(s) => s as &dyn BitRead,
                        None => &empty as &dyn BitRead,
                    })
                    .collect();
                assert_eq!(op::bitop_to_vec(op, &segs), result);
                let len = result.len();
                if len == 0 {
                    self.values.remove(&dest);
                    self.segmented.remove(&dest);
                } else {
                    self.store(&dest, result);
                }
                Ok(len.to_string())
            }
            "BITFIELD" | "BITFIELD_RO" => {
                let ops = field::parse(&rest, name == "BITFIELD_RO", DEFAULT_MAX_BYTES)?;
                if field::is_read_only(&ops) {
                    let empty = Vec::new();
                    let v = self.values.get(&key).unwrap_or(&empty);
                    return Ok(ints(&field::read(v, &ops)));
                }
                let created = !self.values.contains_key(&key);
                let mut v = self.values.get(&key).cloned().unwrap_or_default();
                let mut seg = self
                    .segmented
                    .get(&key)
                    .cloned()
                    .unwrap_or_else(|| Segmented::new(5));
                let applied = field::apply(&mut v, created, &ops);
                assert_eq!(field::apply(&mut seg, created, &ops), applied);
                assert_eq!(seg.to_vec(), v);
                self.values.insert(key.clone(), v);
                self.segmented.insert(key, seg);
                Ok(ints(&applied.replies))
            }
            other => panic!("unknown {other}"),
        })();
        result.unwrap_or_else(|e| e.to_string())
    }
}

fn int_arg(rng: &mut impl Rng) -> String {
    match rng.gen_range(0..12) {
        0 => ["abc", "", "1.5", "+3", "007", "-0"]
            .choose(rng)
            .unwrap()
            .to_string(),
        1 => [
            "9223372036854775807",
            "-9223372036854775808",
            "99999999999999999999",
        ]
        .choose(rng)
        .unwrap()
        .to_string(),
        _ => rng.gen_range(-40..60).to_string(),
    }
}

fn unit_arg(rng: &mut impl Rng) -> Option<String> {
    match rng.gen_range(0..6) {
        0 => Some("BYTE".into()),
        1 | 2 => Some("bit".into()),
        3 => Some("bits".into()),
        _ => None,
    }
}

/// A bit offset argument; only reads get the largest valid offset (a write there makes a
/// 512 MB value).
fn offset_arg(rng: &mut impl Rng, read: bool) -> String {
    match rng.gen_range(0..14) {
        4 if !read => "4294967296".into(),
        0 => "-1".into(),
        1 => "a".into(),
        2 => format!("#{}", rng.gen_range(0..12)),
        3 => "4294967296".into(),
        4 => "4294967295".into(),
        _ => rng.gen_range(0..120).to_string(),
    }
}

fn field_value(rng: &mut impl Rng) -> String {
    match rng.gen_range(0..8) {
        0 => i64::MAX.to_string(),
        1 => i64::MIN.to_string(),
        2 => rng.gen::<i64>().to_string(),
        3 => "x".into(),
        _ => rng.gen_range(-300..300).to_string(),
    }
}

fn field_args(rng: &mut impl Rng, args: &mut Vec<String>, writes: bool) {
    const TYPES: [&str; 14] = [
        "i1", "i5", "i8", "u8", "u1", "i64", "u63", "u64", "I16", "x8", "i0", "u3", "i63", "u32",
    ];
    for _ in 0..rng.gen_range(0..5) {
        let choice = rng.gen_range(0..if writes { 10 } else { 5 });
        let ty = if rng.gen_bool(0.9) {
            TYPES[rng.gen_range(0..7)].to_string()
        } else {
            TYPES.choose(rng).unwrap().to_string()
        };
        match choice {
            0 => {
                args.push("OVERFLOW".into());
                args.push(
                    ["WRAP", "sat", "FAIL", "fail", "bogus"]
                        .choose(rng)
                        .unwrap()
                        .to_string(),
                );
            }
            1..=3 => args.extend(["GET".into(), ty, offset_arg(rng, true)]),
            4 if rng.gen_bool(0.1) => args.push("GET".into()),
            4 => args.extend(["get".into(), ty, offset_arg(rng, true)]),
            5..=6 => args.extend(["SET".into(), ty, offset_arg(rng, false), field_value(rng)]),
            _ => args.extend([
                "INCRBY".into(),
                ty,
                offset_arg(rng, false),
                field_value(rng),
            ]),
        }
    }
}

fn random_command(rng: &mut impl Rng) -> Vec<String> {
    let key = KEYS.choose(rng).unwrap().to_string();
    let mut args: Vec<String> = Vec::new();
    match rng.gen_range(0..20) {
        0 => {
            let len = rng.gen_range(0..12);
            let bytes: Vec<u8> = (0..len)
                .map(|_| *[0u8, 0xff, 0x0f, 0x80, 0x01, b'a'].choose(rng).unwrap())
                .collect();
            // Printable-safe: use Latin letters and a few fixed bytes via hex later.
            args.extend(["SET".into(), key, hex(&bytes)]);
        }
        1..=3 => {
            let off = if rng.gen_bool(0.9) {
                rng.gen_range(0..100).to_string()
            } else {
                offset_arg(rng, false)
            };
            let val = ["0", "1", "1", "0", "2", "-1", "x"][rng.gen_range(0..7)];
            args.extend(["SETBIT".into(), key, off, val.into()]);
        }
        4 => args.extend(["GETBIT".into(), key, offset_arg(rng, true)]),
        5..=7 => {
            args.extend(["BITCOUNT".into(), key]);
            match rng.gen_range(0..6) {
                0 => {}
                1 => args.push(int_arg(rng)),
                _ => {
                    args.push(int_arg(rng));
                    args.push(int_arg(rng));
                    if let Some(u) = unit_arg(rng) {
                        args.push(u);
                    }
                }
            }
        }
        8..=10 => {
            let bit = ["0", "1", "1", "0", "2", "x"][rng.gen_range(0..6)];
            args.extend(["BITPOS".into(), key, bit.into()]);
            let n = rng.gen_range(0..4);
            if n >= 1 {
                args.push(int_arg(rng));
            }
            if n >= 2 {
                args.push(int_arg(rng));
            }
            if n >= 3 {
                if let Some(u) = unit_arg(rng) {
                    args.push(u);
                }
            }
        }
        11..=12 => {
            let op = ["AND", "or", "XOR", "NOT", "not", "nand"]
                .choose(rng)
                .unwrap();
            args.extend(["BITOP".into(), op.to_string(), key]);
            for _ in 0..rng.gen_range(1..4) {
                args.push(KEYS.choose(rng).unwrap().to_string());
            }
        }
        13..=17 => {
            args.extend(["BITFIELD".into(), key]);
            field_args(rng, &mut args, true);
        }
        _ => {
            args.extend(["BITFIELD_RO".into(), key]);
            let writes = rng.gen_bool(0.2);
            field_args(rng, &mut args, writes);
        }
    }
    args
}

/// SET values are sent as raw bytes; this marks them for [`raw`].
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect::<String>() + ":hex"
}

/// Turns the argument list into raw bytes (decoding `:hex` values).
fn raw(args: &[String]) -> Vec<Vec<u8>> {
    args.iter()
        .map(|a| match a.strip_suffix(":hex") {
            Some(h) => (0..h.len() / 2)
                .map(|i| u8::from_str_radix(&h[2 * i..2 * i + 2], 16).unwrap())
                .collect(),
            None => a.as_bytes().to_vec(),
        })
        .collect()
}

#[test]
fn bit_commands_match_redis() {
    let redis = RedisServer::start(&[]);
    let mut con = redis.client();
    let mut rng = rng("bits");
    let mut model = Model::default();
    for step in 0..20000 {
        if step % 2500 == 0 {
            run(&mut con, &[b"FLUSHALL"]);
            model = Model::default();
        }
        let args = raw(&random_command(&mut rng));
        let argv: Vec<&[u8]> = args.iter().map(|a| &a[..]).collect();
        let theirs = run(&mut con, &argv);
        let ours = model.exec(&args);
        let shown: Vec<String> = args
            .iter()
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        assert_eq!(ours, theirs, "step {step}: {shown:?}");
        for k in KEYS {
            assert_eq!(
                model.values.get(k).cloned(),
                get_bytes(&mut con, k),
                "step {step}: value of {k} after {shown:?}"
            );
        }
    }
}
