//! Differential test of `kvik_types::geo` against redis-server: random points are GEOADDed to
//! Redis; scores (ZSCORE), GEOPOS, GEOHASH, GEODIST and GEOSEARCH replies must equal what the
//! crate computes, GEOSEARCH being simulated over a sorted copy of the same scores.

mod common;

use common::*;
use kvik_types::geo::{self, Search, Shape};
use rand::Rng;
use std::collections::BTreeSet;

const UNITS: [&str; 4] = ["m", "km", "ft", "mi"];

fn random_point(rng: &mut impl Rng, centres: &[(f64, f64, f64)]) -> (f64, f64) {
    let (clon, clat, spread) = centres[rng.gen_range(0..centres.len())];
    let lon = (clon + rng.gen_range(-spread..=spread)).clamp(geo::LON_MIN, geo::LON_MAX);
    let lat = (clat + rng.gen_range(-spread..=spread)).clamp(geo::LAT_MIN, geo::LAT_MAX);
    (lon, lat)
}

fn item(name: &str, score: u64, hit: &geo::Hit, unit: f64) -> String {
    format!(
        "[{name}, {}, {score}, [{}, {}]]",
        geo::format_distance(hit.meters / unit),
        geo::format_coordinate(hit.lon),
        geo::format_coordinate(hit.lat)
    )
}

/// Splits a rendered reply array of items back into item strings (items contain no "]], [").
fn items(reply: &str) -> Vec<String> {
    let inner = &reply[1..reply.len() - 1];
    if inner.is_empty() {
        return Vec::new();
    }
    inner
        .split("]], ")
        .map(|s| {
            if s.ends_with("]]") {
                s.to_string()
            } else {
                format!("{s}]]")
            }
        })
        .collect()
}

#[test]
fn geo_commands_match_redis() {
    let redis = RedisServer::start(&[]);
    let mut con = redis.client();
    let mut rng = rng("geo");
    let (mut total_hits, mut empty_searches) = (0usize, 0usize);
    for round in 0..8 {
        run(&mut con, &[b"FLUSHALL"]);
        let centres: Vec<(f64, f64, f64)> = (0..3)
            .map(|_| {
                let spread = [0.001, 0.05, 1.0, 20.0][rng.gen_range(0..4)];
                (
                    rng.gen_range(-180.0..=180.0),
                    rng.gen_range(-85.0..=85.0),
                    spread,
                )
            })
            .chain([(180.0, 0.0, 0.5), (0.0, 85.0, 0.5)])
            .collect();
        let mut points: Vec<(String, u64)> = Vec::new();
        let mut by_score: BTreeSet<(u64, String)> = BTreeSet::new();
        for i in 0..300 {
            let (lon, lat) = random_point(&mut rng, &centres);
            let name = format!("p{round}-{i}");
            let (slon, slat) = (lon.to_string(), lat.to_string());
            let reply = run(
                &mut con,
                &[
                    b"GEOADD",
                    b"g",
                    slon.as_bytes(),
                    slat.as_bytes(),
                    name.as_bytes(),
                ],
            );
            assert_eq!(reply, "1");
            let score = geo::score(lon, lat).unwrap() as u64;
            let theirs = run(&mut con, &[b"ZSCORE", b"g", name.as_bytes()]);
            assert_eq!(theirs, score.to_string(), "score of ({lon}, {lat})");
            points.push((name.clone(), score));
            by_score.insert((score, name));
        }
        // Out-of-range coordinates.
        for (lon, lat) in [(180.5, 0.0), (0.0, 85.06), (-180.0001, -85.1)] {
            let (slon, slat) = (lon.to_string(), lat.to_string());
            let theirs = run(
                &mut con,
                &[b"GEOADD", b"g", slon.as_bytes(), slat.as_bytes(), b"x"],
            );
            assert_eq!(theirs, geo::score(lon, lat).unwrap_err().to_string());
        }
        // GEOPOS, GEOHASH, GEODIST.
        for _ in 0..100 {
            let (a, sa) = &points[rng.gen_range(0..points.len())];
            let (b, sb) = &points[rng.gen_range(0..points.len())];
            let (lon, lat) = geo::decode_score(*sa as f64);
            let pos = run(&mut con, &[b"GEOPOS", b"g", a.as_bytes(), b"missing"]);
            assert_eq!(
                pos,
                format!(
                    "[[{}, {}], (nil)]",
                    geo::format_coordinate(lon),
                    geo::format_coordinate(lat)
                )
            );
            let gh = run(&mut con, &[b"GEOHASH", b"g", a.as_bytes()]);
            assert_eq!(gh, format!("[{}]", geo::geohash_string(*sa as f64)));
            let unit = UNITS[rng.gen_range(0..4)];
            let dist = run(
                &mut con,
                &[
                    b"GEODIST",
                    b"g",
                    a.as_bytes(),
                    b.as_bytes(),
                    unit.as_bytes(),
                ],
            );
            let (lon2, lat2) = geo::decode_score(*sb as f64);
            let meters = geo::distance(lon, lat, lon2, lat2);
            let per_unit = geo::unit_meters(unit.as_bytes()).unwrap();
            assert_eq!(
                dist,
                geo::format_distance(meters / per_unit),
                "{a} {b} {unit}"
            );
        }
        // GEOSEARCH.
        for q in 0..150 {
            let from_member = rng
                .gen_bool(0.2)
                .then(|| points[rng.gen_range(0..points.len())].clone());
            let (lon, lat) = if let Some((_, score)) = &from_member {
                geo::decode_score(*score as f64)
            } else if rng.gen_bool(0.8) {
                random_point(&mut rng, &centres)
            } else {
                (rng.gen_range(-180.0..=180.0), rng.gen_range(-85.0..=85.0))
            };
            let unit_name = UNITS[rng.gen_range(0..4)];
            let unit = geo::unit_meters(unit_name.as_bytes()).unwrap();
            let size_m = 10f64.powf(rng.gen_range(0.0..7.0));
            let shape = if rng.gen_bool(0.5) {
                Shape::Radius(size_m / unit)
            } else {
                Shape::Box {
                    width: size_m / unit * rng.gen_range(0.2..2.0),
                    height: size_m / unit * rng.gen_range(0.2..2.0),
                }
            };
            let search = Search {
                lon,
                lat,
                shape,
                unit,
            };
            // 0 natural order, 1 ASC, 2 COUNT n ANY, 3 DESC, 4 COUNT n (sorted ascending)
            let mode = rng.gen_range(0..5);
            let count = rng.gen_range(1..20usize);
            let mut args: Vec<String> = vec!["GEOSEARCH".into(), "g".into()];
            match &from_member {
                Some((name, _)) => args.extend(["FROMMEMBER".into(), name.clone()]),
                None => args.extend(["FROMLONLAT".into(), lon.to_string(), lat.to_string()]),
            }
            match shape {
                Shape::Radius(r) => args.extend(["BYRADIUS".into(), r.to_string()]),
                Shape::Box { width, height } => {
                    args.extend(["BYBOX".into(), width.to_string(), height.to_string()])
                }
            }
            args.push(unit_name.into());
            match mode {
                1 => args.push("ASC".into()),
                2 => args.extend(["COUNT".into(), count.to_string(), "ANY".into()]),
                3 => args.push("DESC".into()),
                4 => args.extend(["COUNT".into(), count.to_string()]),
                _ => {}
            }
            args.extend(["WITHDIST".into(), "WITHHASH".into(), "WITHCOORD".into()]);
            let argv: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
            let theirs = items(&run(&mut con, &argv));

            let mut hits: Vec<(String, u64, geo::Hit)> = Vec::new();
            'scan: for r in search.ranges() {
                for (score, name) in by_score.range((r.min, String::new())..(r.max, String::new()))
                {
                    if let Some(hit) = search.test(*score as f64) {
                        hits.push((name.clone(), *score, hit));
                        if mode == 2 && hits.len() >= count {
                            break 'scan;
                        }
                    }
                }
            }
            let mut ours: Vec<String> = hits.iter().map(|(n, s, h)| item(n, *s, h, unit)).collect();
            total_hits += ours.len();
            empty_searches += ours.is_empty() as usize;
            let context = format!("round {round} query {q}: {args:?}");
            let dist = |i: &String| -> String { i.split(", ").nth(1).unwrap().to_string() };
            if mode == 1 || mode == 3 {
                let dists: Vec<f64> = theirs.iter().map(|i| dist(i).parse().unwrap()).collect();
                let ordered = dists.windows(2).all(|w| {
                    if mode == 1 {
                        w[0] <= w[1]
                    } else {
                        w[0] >= w[1]
                    }
                });
                assert!(ordered, "{context}: not in distance order");
                let mut sorted_theirs = theirs.clone();
                sorted_theirs.sort();
                ours.sort();
                assert_eq!(sorted_theirs, ours, "{context}");
            } else if mode == 4 {
                // Sorted, then cut: equal distances at the cut may come in either order.
                let mut by_distance = hits.clone();
                by_distance.sort_by(|a, b| a.2.meters.total_cmp(&b.2.meters));
                by_distance.truncate(count);
                let expected: Vec<String> = by_distance
                    .iter()
                    .map(|(_, _, h)| geo::format_distance(h.meters / unit))
                    .collect();
                let their_dists: Vec<String> = theirs.iter().map(dist).collect();
                assert_eq!(their_dists, expected, "{context}");
                assert!(theirs.iter().all(|i| ours.contains(i)), "{context}");
            } else {
                assert_eq!(theirs, ours, "{context}");
            }
        }
    }
    eprintln!("geo: {total_hits} search hits, {empty_searches} empty searches");
    assert!(total_hits > 1000 && empty_searches > 10);
}
