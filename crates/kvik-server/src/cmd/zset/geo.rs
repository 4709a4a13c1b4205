//! Geo commands: GEOADD GEOPOS GEODIST GEOHASH GEOSEARCH GEOSEARCHSTORE and GEORADIUS,
//! GEORADIUSBYMEMBER with their `_RO` forms (Redis's `geo` group).
//!
//! A geo key is a sorted set whose scores are 52-bit geohashes (`kvik_types::geo`), so ZRANGE,
//! ZREM and the rest work on it and it is stored, copied and expired as any sorted set. This
//! module is a child of `zset` so it reuses the sorted set's reader ([`ZSet`]), its ZADD and its
//! STORE writer instead of having its own: GEOADD is ZADD with computed scores (as in Redis), a
//! search is one score-range walk of the score index per cell of the plan the algorithm crate
//! computes, filtered by the exact in-radius / in-box test.
//!
//! Argument order follows Redis 7.0's `georadiusGeneric` (it decides which error wins): the
//! source key's type first, then the centre and shape of GEORADIUS*, then the options left to
//! right (GEOSEARCH's FROMMEMBER is looked up where it appears), then the combination checks.

use super::range::ScoreRange as ZRange;
use super::{basic, store_result, ZSet};
use crate::cmd::ctx::{Args, CmdError, CmdResult, Ctx, Reply};
use crate::cmd::spec::{collection_command, Class, CommandSpec, Flags, Handler, KeySpec};
use bytes::Bytes;
use kvik_resp::{parse_i64, parse_redis_double, Proto};
use kvik_types::geo::{self, Search, Shape};

const READ: Flags = Flags::READONLY;
const WRITE_OOM: Flags = Flags::WRITE.union(Flags::DENYOOM);
const ACL_READ: &[&str] = &["read", "geo", "slow"];
const ACL_WRITE: &[&str] = &["write", "geo", "slow"];

const SEARCH_COMPLEXITY: &str =
    "O(N+log(M)) where N is the number of elements in the grid-aligned \
     bounding box area around the shape provided as the filter and M is the number of items \
     inside the shape";

/// Declares one geo command (group "geo").
const fn g(
    name: &'static str,
    arity: i32,
    flags: Flags,
    keys: KeySpec,
    handler: Handler,
    acl: &'static [&'static str],
) -> CommandSpec {
    collection_command("geo", name, arity, flags, keys, handler, acl)
}

pub static COMMANDS: &[CommandSpec] = &[
    // GEOADD runs ZADD, whose event it emits.
    g("geoadd", -5, WRITE_OOM, KeySpec::ONE, geoadd, ACL_WRITE)
        .rtc_write()
        .event(Class::ZSet, "zadd")
        .doc(
        "Adds one or more members to a geospatial index. The key is created if it doesn't exist.",
        "3.2.0",
        "O(log(N)) for each item added, where N is the number of elements in the sorted set.",
    ),
    g("geopos", -2, READ, KeySpec::ONE, geopos, ACL_READ).rtc_nowait_read().doc(
        "Returns the longitude and latitude of members from a geospatial index.",
        "3.2.0",
        "O(N) where N is the number of members requested.",
    ),
    g("geodist", -4, READ, KeySpec::ONE, geodist, ACL_READ).rtc_nowait_read().doc(
        "Returns the distance between two members of a geospatial index.",
        "3.2.0",
        "O(1)",
    ),
    g("geohash", -2, READ, KeySpec::ONE, geohash, ACL_READ).rtc_nowait_read().doc(
        "Returns members from a geospatial index as geohash strings.",
        "3.2.0",
        "O(N) where N is the number of members requested.",
    ),
    g("geosearch", -7, READ, KeySpec::ONE, geosearch, ACL_READ).rtc_nowait_read().doc(
        "Queries a geospatial index for members inside an area of a box or a circle.",
        "6.2.0",
        SEARCH_COMPLEXITY,
    ),
    g("geosearchstore", -8, WRITE_OOM, KeySpec::TWO, geosearchstore, ACL_WRITE)
        .event(Class::ZSet, "geosearchstore")
        .event(Class::Generic, "del")
        .doc(
        "Queries a geospatial index for members inside an area of a box or a circle, optionally stores the result.",
        "6.2.0",
        SEARCH_COMPLEXITY,
    ),
    g("georadius", -6, WRITE_OOM, KeySpec::ONE, georadius, ACL_WRITE)
        .movable(radius_keys)
        .event(Class::ZSet, "georadiusstore")
        .event(Class::Generic, "del")
        .doc(
            "Queries a geospatial index for members within a distance from a coordinate, optionally stores the result.",
            "3.2.0",
            SEARCH_COMPLEXITY,
        ),
    g("georadius_ro", -6, READ, KeySpec::ONE, georadius_ro, ACL_READ).rtc_nowait_read().doc(
        "Returns members from a geospatial index that are within a distance from a coordinate.",
        "3.2.10",
        SEARCH_COMPLEXITY,
    ),
    g("georadiusbymember", -5, WRITE_OOM, KeySpec::ONE, georadiusbymember, ACL_WRITE)
        .movable(by_member_keys)
        .event(Class::ZSet, "georadiusstore")
        .event(Class::Generic, "del")
        .doc(
            "Queries a geospatial index for members within a distance from a member, optionally stores the result.",
            "3.2.0",
            SEARCH_COMPLEXITY,
        ),
    g("georadiusbymember_ro", -5, READ, KeySpec::ONE, georadiusbymember_ro, ACL_READ).rtc_nowait_read().doc(
        "Returns members from a geospatial index that are within a distance from a member.",
        "3.2.10",
        SEARCH_COMPLEXITY,
    ),
];

const ERR_MEMBER: CmdError = CmdError::fixed("could not decode requested zset member");
const ERR_COUNT: CmdError = CmdError::fixed("COUNT must be > 0");
const ERR_ANY: CmdError = CmdError::fixed("the ANY argument requires COUNT argument");
const ERR_RADIUS_NEGATIVE: CmdError = CmdError::fixed("radius cannot be negative");
const ERR_BOX_NEGATIVE: CmdError = CmdError::fixed("height or width cannot be negative");

/// GEORADIUS and GEORADIUSBYMEMBER's keys as Redis 7.0's key specs find them: the source, then
/// the key after the first STORE and the key after the first STOREDIST at or after `from` (the
/// first option's position).
fn store_keys(args: &Args, from: usize) -> Vec<usize> {
    let mut keys = vec![1];
    for keyword in [&b"store"[..], b"storedist"] {
        let found =
            (from..args.len().saturating_sub(1)).find(|&i| args[i].eq_ignore_ascii_case(keyword));
        keys.extend(found.map(|i| i + 1));
    }
    keys
}

/// GEORADIUS key lon lat radius unit [options]: options from index 6.
fn radius_keys(args: &Args) -> Vec<usize> {
    store_keys(args, 6)
}

/// GEORADIUSBYMEMBER key member radius unit [options]: options from index 5.
fn by_member_keys(args: &Args) -> Vec<usize> {
    store_keys(args, 5)
}

/// A float argument with Redis's `getDoubleFromObjectOrReply` rules and its error message.
fn float_arg(arg: &[u8], message: &'static str) -> Result<f64, CmdError> {
    parse_redis_double(arg).ok_or(CmdError::fixed(message))
}

/// A longitude and latitude pair, checked against the limits.
fn lon_lat(lon: &[u8], lat: &[u8]) -> Result<(f64, f64), CmdError> {
    let lon = parse_redis_double(lon).ok_or(CmdError::not_float())?;
    let lat = parse_redis_double(lat).ok_or(CmdError::not_float())?;
    geo::check_lon_lat(lon, lat)?;
    Ok((lon, lat))
}

/// A radius and its unit: (radius, meters per unit).
fn radius(value: &[u8], unit: &[u8]) -> Result<(f64, f64), CmdError> {
    let r = float_arg(value, "need numeric radius")?;
    if r < 0.0 {
        return Err(ERR_RADIUS_NEGATIVE);
    }
    Ok((r, geo::unit_meters(unit)?))
}

/// The decoded position of `member` (`None` if it is not in the set).
fn position(z: &ZSet<'_, '_>, member: &[u8]) -> Result<Option<(f64, f64)>, CmdError> {
    Ok(z.score(member)?.map(geo::decode_score))
}

/// A coordinate as Redis's `addReplyHumanLongDouble` sends it: a bulk string in RESP2, a double
/// in RESP3, in both cases with [`geo::format_coordinate`]'s text.
fn coordinate(out: &mut Reply, x: f64) {
    let text = geo::format_coordinate(x);
    if out.proto == Proto::Resp3 {
        out.buf.push(b',');
        out.buf.extend_from_slice(text.as_bytes());
        out.buf.extend_from_slice(b"\r\n");
    } else {
        out.bulk(text.as_bytes());
    }
}

// ---- GEOADD, GEOPOS, GEODIST, GEOHASH ---------------------------------------------------------

/// GEOADD key [NX|XX] [CH] longitude latitude member [...]: ZADD with the options as given and
/// each position turned into its geohash score, as Redis rewrites the command.
fn geoadd(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let mut first = 2;
    let (mut nx, mut xx) = (false, false);
    while first < args.len() {
        match args[first].to_ascii_lowercase().as_slice() {
            b"nx" => nx = true,
            b"xx" => xx = true,
            b"ch" => {}
            _ => break,
        }
        first += 1;
    }
    let triples = &args[first..];
    if !triples.len().is_multiple_of(3) || (nx && xx) {
        return Err(CmdError::syntax());
    }
    let mut zadd_args: Vec<Bytes> = Vec::with_capacity(first + triples.len() / 3 * 2);
    zadd_args.push(Bytes::from_static(b"zadd"));
    zadd_args.extend(args[1..first].iter().cloned());
    for t in triples.chunks_exact(3) {
        let (lon, lat) = lon_lat(&t[0], &t[1])?;
        let bits = geo::geohash_bits(lon, lat)?;
        zadd_args.push(Bytes::from(bits.to_string()));
        zadd_args.push(t[2].clone());
    }
    basic::zadd(ctx, &zadd_args)
}

/// GEOPOS key [member ...]: [longitude, latitude] per member, a null array for a missing one.
fn geopos(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let z = ZSet::read(ctx, &args[1])?;
    let members = &args[2..];
    let mut found = Vec::with_capacity(members.len());
    for m in members {
        found.push(match &z {
            Some(z) => position(z, m)?,
            None => None,
        });
    }
    ctx.out.array(found.len());
    for p in found {
        match p {
            Some((lon, lat)) => {
                ctx.out.array(2);
                coordinate(ctx.out, lon);
                coordinate(ctx.out, lat);
            }
            None => ctx.out.null_array(),
        }
    }
    Ok(())
}

/// GEODIST key member1 member2 [m|km|ft|mi]: nil if either member is missing.
fn geodist(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let unit = match args.len() {
        4 => 1.0,
        5 => geo::unit_meters(&args[4])?,
        _ => return Err(CmdError::syntax()),
    };
    let Some(z) = ZSet::read(ctx, &args[1])? else {
        ctx.out.null();
        return Ok(());
    };
    match (position(&z, &args[2])?, position(&z, &args[3])?) {
        (Some((lon1, lat1)), Some((lon2, lat2))) => {
            let d = geo::distance(lon1, lat1, lon2, lat2) / unit;
            ctx.out.bulk(geo::format_distance(d).as_bytes());
        }
        _ => ctx.out.null(),
    }
    Ok(())
}

/// GEOHASH key [member ...]: the 11-character geohash per member, nil for a missing one.
fn geohash(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let z = ZSet::read(ctx, &args[1])?;
    let members = &args[2..];
    let mut hashes = Vec::with_capacity(members.len());
    for m in members {
        hashes.push(match &z {
            Some(z) => z.score(m)?.map(geo::geohash_string),
            None => None,
        });
    }
    ctx.out.array(hashes.len());
    for h in hashes {
        ctx.out.bulk_or_null(h.as_deref().map(str::as_bytes));
    }
    Ok(())
}

// ---- Searches ---------------------------------------------------------------------------------

/// Which search command runs: where its arguments start and what it may do.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Form {
    /// GEORADIUS key lon lat radius unit ...; `store` unless _RO.
    Radius { store: bool },
    /// GEORADIUSBYMEMBER key member radius unit ...; `store` unless _RO.
    ByMember { store: bool },
    /// GEOSEARCH key ...
    Search,
    /// GEOSEARCHSTORE dest key ...
    SearchStore,
}

impl Form {
    fn source(self) -> usize {
        if self == Form::SearchStore {
            2
        } else {
            1
        }
    }
    fn is_search(self) -> bool {
        matches!(self, Form::Search | Form::SearchStore)
    }
    /// The keyspace event of a stored result.
    fn store_event(self) -> &'static str {
        if self.is_search() {
            "geosearchstore"
        } else {
            "georadiusstore"
        }
    }
    fn may_store(self) -> bool {
        matches!(
            self,
            Form::Radius { store: true } | Form::ByMember { store: true } | Form::SearchStore
        )
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Sort {
    None,
    Asc,
    Desc,
}

/// A search's options once parsed.
struct Query<'a> {
    centre: Option<(f64, f64)>,
    shape: Option<(Shape, f64)>,
    with_dist: bool,
    with_hash: bool,
    with_coord: bool,
    any: bool,
    count: u64,
    sort: Sort,
    store: Option<&'a [u8]>,
    store_dist: bool,
}

/// Parses the command's arguments, looking members up in `z` (the source, if it exists) where
/// they appear, with Redis's order of checks.
fn parse<'a>(form: Form, args: &'a Args, z: Option<&ZSet<'_, '_>>) -> Result<Query<'a>, CmdError> {
    let mut q = Query {
        centre: None,
        shape: None,
        with_dist: false,
        with_hash: false,
        with_coord: false,
        any: false,
        count: 0,
        sort: Sort::None,
        store: (form == Form::SearchStore).then(|| &args[1][..]),
        store_dist: false,
    };
    let base = match form {
        Form::Radius { .. } => {
            q.centre = Some(lon_lat(&args[2], &args[3])?);
            let (r, unit) = radius(&args[4], &args[5])?;
            q.shape = Some((Shape::Radius(r), unit));
            6
        }
        Form::ByMember { .. } => {
            // Without a source Redis skips the member and the radius and only parses options.
            if let Some(z) = z {
                q.centre = Some(position(z, &args[2])?.ok_or(ERR_MEMBER)?);
                let (r, unit) = radius(&args[3], &args[4])?;
                q.shape = Some((Shape::Radius(r), unit));
            }
            5
        }
        Form::Search => 2,
        Form::SearchStore => 3,
    };
    let (mut from_member, mut from_lonlat, mut by_radius, mut by_box) =
        (false, false, false, false);
    let mut i = base;
    while i < args.len() {
        let left = args.len() - i - 1;
        let opt = args[i].to_ascii_lowercase();
        match opt.as_slice() {
            b"withdist" => q.with_dist = true,
            b"withhash" => q.with_hash = true,
            b"withcoord" => q.with_coord = true,
            b"any" => q.any = true,
            b"asc" => q.sort = Sort::Asc,
            b"desc" => q.sort = Sort::Desc,
            b"count" if left >= 1 => {
                let n = parse_i64(&args[i + 1]).ok_or(CmdError::not_integer())?;
                if n <= 0 {
                    return Err(ERR_COUNT);
                }
                q.count = n as u64;
                i += 1;
            }
            b"store" | b"storedist" if left >= 1 && form.may_store() && !form.is_search() => {
                q.store = Some(&args[i + 1]);
                q.store_dist = opt == b"storedist";
                i += 1;
            }
            b"storedist" if form == Form::SearchStore => q.store_dist = true,
            b"frommember" if left >= 1 && form.is_search() && !from_lonlat => {
                if let Some(z) = z {
                    q.centre = Some(position(z, &args[i + 1])?.ok_or(ERR_MEMBER)?);
                }
                from_member = true;
                i += 1;
            }
            b"fromlonlat" if left >= 2 && form.is_search() && !from_member => {
                q.centre = Some(lon_lat(&args[i + 1], &args[i + 2])?);
                from_lonlat = true;
                i += 2;
            }
            b"byradius" if left >= 2 && form.is_search() && !by_box => {
                let (r, unit) = radius(&args[i + 1], &args[i + 2])?;
                q.shape = Some((Shape::Radius(r), unit));
                by_radius = true;
                i += 2;
            }
            b"bybox" if left >= 3 && form.is_search() && !by_radius => {
                let width = float_arg(&args[i + 1], "need numeric width")?;
                let height = float_arg(&args[i + 2], "need numeric height")?;
                if width < 0.0 || height < 0.0 {
                    return Err(ERR_BOX_NEGATIVE);
                }
                let unit = geo::unit_meters(&args[i + 3])?;
                q.shape = Some((Shape::Box { width, height }, unit));
                by_box = true;
                i += 3;
            }
            _ => return Err(CmdError::syntax()),
        }
        i += 1;
    }
    let name = String::from_utf8_lossy(&args[0]);
    if q.store.is_some() && (q.with_dist || q.with_hash || q.with_coord) {
        let what = if form == Form::SearchStore {
            "GEOSEARCHSTORE"
        } else {
            "STORE option in GEORADIUS"
        };
        return Err(CmdError::err(format_args!(
            "{what} is not compatible with WITHDIST, WITHHASH and WITHCOORD options"
        )));
    }
    if form.is_search() && !(from_member || from_lonlat) {
        return Err(CmdError::err(format_args!(
            "exactly one of FROMMEMBER or FROMLONLAT can be specified for {name}"
        )));
    }
    if form.is_search() && !(by_radius || by_box) {
        return Err(CmdError::err(format_args!(
            "exactly one of BYRADIUS and BYBOX can be specified for {name}"
        )));
    }
    if q.any && q.count == 0 {
        return Err(ERR_ANY);
    }
    Ok(q)
}

/// One member inside the searched area.
struct Found {
    member: Vec<u8>,
    score: f64,
    hit: geo::Hit,
}

/// The members of `z` inside the area, in Redis's visiting order (cell by cell, score order
/// within a cell); with `limit`, the first `limit` of them (ANY).
fn find(z: &ZSet<'_, '_>, search: &Search, limit: u64) -> Result<Vec<Found>, CmdError> {
    let mut found = Vec::new();
    for r in search.ranges() {
        let range = ZRange {
            min: r.min as f64,
            max: r.max as f64,
            minex: false,
            maxex: true,
        };
        z.walk_score(&range, false, 0, -1, |member, score| {
            if limit > 0 && found.len() as u64 >= limit {
                return;
            }
            if let Some(hit) = search.test(score) {
                found.push(Found {
                    member: member.to_vec(),
                    score,
                    hit,
                });
            }
        })?;
        if limit > 0 && found.len() as u64 >= limit {
            break;
        }
    }
    Ok(found)
}

/// The body of every search command.
fn search_generic(ctx: &mut Ctx<'_>, args: &Args, form: Form) -> CmdResult {
    let storage = ctx.storage();
    // A command that may store locks its keys first (the source and every argument after a
    // STORE or STOREDIST: the last one given is the destination), so the result it writes is
    // computed from the state it locked.
    let lock_keys: Vec<&[u8]> = match form {
        Form::SearchStore => vec![&args[1], &args[2]],
        Form::Radius { store: true } | Form::ByMember { store: true } => {
            let mut keys = vec![&args[1][..]];
            for i in 2..args.len() - 1 {
                let a = &args[i];
                if a.eq_ignore_ascii_case(b"store") || a.eq_ignore_ascii_case(b"storedist") {
                    keys.push(&args[i + 1]);
                }
            }
            keys
        }
        _ => Vec::new(),
    };
    let _guard = (!lock_keys.is_empty()).then(|| storage.lock(ctx.db(), &lock_keys));
    let z = ZSet::read(ctx, &args[form.source()])?;
    let q = parse(form, args, z.as_ref())?;
    let Some(z) = z else {
        match q.store {
            Some(dst) => {
                store_result(ctx, dst, &[], form.store_event())?;
                ctx.out.int(0);
            }
            None => ctx.out.array(0),
        }
        return Ok(());
    };
    let ((lon, lat), (shape, unit)) = match (q.centre, q.shape) {
        (Some(c), Some(s)) => (c, s),
        _ => return Err(CmdError::syntax()),
    };
    let search = Search {
        lon,
        lat,
        shape,
        unit,
    };
    let mut found = find(&z, &search, if q.any { q.count } else { 0 })?;
    let sort = match q.sort {
        Sort::None if q.count > 0 && !q.any => Sort::Asc,
        s => s,
    };
    match sort {
        Sort::Asc => found.sort_by(|a, b| a.hit.meters.total_cmp(&b.hit.meters)),
        Sort::Desc => found.sort_by(|a, b| b.hit.meters.total_cmp(&a.hit.meters)),
        Sort::None => {}
    }
    if q.count > 0 {
        found.truncate(q.count.min(usize::MAX as u64) as usize);
    }
    if let Some(dst) = q.store {
        let items: Vec<(Vec<u8>, f64)> = found
            .into_iter()
            .map(|f| {
                let score = if q.store_dist {
                    f.hit.meters / unit
                } else {
                    f.score
                };
                (f.member, score)
            })
            .collect();
        store_result(ctx, dst, &items, form.store_event())?;
        ctx.out.int(items.len() as i64);
        return Ok(());
    }
    let extras = usize::from(q.with_dist) + usize::from(q.with_hash) + usize::from(q.with_coord);
    let out = &mut *ctx.out;
    out.array(found.len());
    for f in &found {
        if extras > 0 {
            out.array(extras + 1);
        }
        out.bulk(&f.member);
        if q.with_dist {
            out.bulk(geo::format_distance(f.hit.meters / unit).as_bytes());
        }
        if q.with_hash {
            out.int(f.score as i64);
        }
        if q.with_coord {
            out.array(2);
            coordinate(out, f.hit.lon);
            coordinate(out, f.hit.lat);
        }
    }
    Ok(())
}

/// GEOSEARCH key FROMMEMBER m | FROMLONLAT lon lat  BYRADIUS r unit | BYBOX w h unit
/// [ASC|DESC] [COUNT n [ANY]] [WITHCOORD] [WITHDIST] [WITHHASH]
fn geosearch(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    search_generic(ctx, args, Form::Search)
}

/// GEOSEARCHSTORE dest key ... [STOREDIST]
fn geosearchstore(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    search_generic(ctx, args, Form::SearchStore)
}

/// GEORADIUS key lon lat radius unit [options] [STORE key] [STOREDIST key]
fn georadius(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    search_generic(ctx, args, Form::Radius { store: true })
}

fn georadius_ro(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    search_generic(ctx, args, Form::Radius { store: false })
}

/// GEORADIUSBYMEMBER key member radius unit [options] [STORE key] [STOREDIST key]
fn georadiusbymember(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    search_generic(ctx, args, Form::ByMember { store: true })
}

fn georadiusbymember_ro(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    search_generic(ctx, args, Form::ByMember { store: false })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: &[&str]) -> Vec<Bytes> {
        v.iter().map(|s| Bytes::from(s.to_string())).collect()
    }

    #[test]
    fn store_keys_follow_the_key_specs() {
        let a = args(&[
            "georadius",
            "k",
            "1",
            "2",
            "3",
            "m",
            "STORE",
            "x",
            "storedist",
            "y",
        ]);
        assert_eq!(radius_keys(&a), vec![1, 7, 9]);
        let a = args(&["georadius", "k", "1", "2", "3", "m", "STORE"]);
        assert_eq!(radius_keys(&a), vec![1]);
        let a = args(&["georadiusbymember", "k", "m", "3", "km", "storedist", "d"]);
        assert_eq!(by_member_keys(&a), vec![1, 6]);
    }
}
