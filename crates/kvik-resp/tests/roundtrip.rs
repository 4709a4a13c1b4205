//! Property tests: what the encoders write, the parsers read back identically, however the
//! bytes are split across reads.

use kvik_resp::{
    encode, format_g17, parse_frame, Frame, Limits, Request, RequestArgs, RequestParser,
};
use proptest::prelude::*;

fn args_strategy() -> impl Strategy<Value = Vec<Vec<u8>>> {
    prop::collection::vec(prop::collection::vec(any::<u8>(), 0..40), 1..6)
}

fn encode_command(args: &[Vec<u8>]) -> Vec<u8> {
    let slices: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
    let mut out = Vec::new();
    encode::command(&mut out, &slices);
    out
}

fn args_of(req: &Request, buf: &[u8]) -> Vec<Vec<u8>> {
    req.args
        .to_slices(buf)
        .into_iter()
        .map(<[u8]>::to_vec)
        .collect()
}

proptest! {
    #[test]
    fn command_roundtrips_at_every_split(args in args_strategy()) {
        let buf = encode_command(&args);
        let limits = Limits::default();
        let whole = RequestParser::new().parse(&buf, &limits).unwrap().unwrap();
        prop_assert!(matches!(whole.args, RequestArgs::Spans(_)));
        prop_assert_eq!(whole.consumed, buf.len());
        prop_assert_eq!(args_of(&whole, &buf), args.clone());

        // One prefix, then the whole, on the same parser.
        for cut in 0..buf.len() {
            let mut p = RequestParser::new();
            prop_assert_eq!(p.parse(&buf[..cut], &limits), Ok(None));
            let req = p.parse(&buf, &limits).unwrap().unwrap();
            prop_assert_eq!(&req, &whole);
            prop_assert!(!p.in_progress());
        }

        // Every prefix in turn, on one parser.
        let mut p = RequestParser::new();
        for cut in 0..buf.len() {
            prop_assert_eq!(p.parse(&buf[..cut], &limits), Ok(None));
        }
        prop_assert_eq!(p.parse(&buf, &limits).unwrap().unwrap(), whole);
    }

    #[test]
    fn pipelined_commands_parse_in_order(
        cmds in prop::collection::vec(args_strategy(), 1..5),
        chunk in 1usize..64,
    ) {
        let mut stream = Vec::new();
        for c in &cmds {
            stream.extend_from_slice(&encode_command(c));
        }
        let limits = Limits::default();

        // All bytes present at once.
        let mut p = RequestParser::new();
        let mut buf: &[u8] = &stream;
        for c in &cmds {
            let req = p.parse(buf, &limits).unwrap().unwrap();
            prop_assert_eq!(&args_of(&req, buf), c);
            buf = &buf[req.consumed..];
        }
        prop_assert!(buf.is_empty());
        prop_assert_eq!(p.parse(buf, &limits), Ok(None));

        // Bytes arriving `chunk` at a time into a connection buffer.
        let mut p = RequestParser::new();
        let mut conn: Vec<u8> = Vec::new();
        let mut got = Vec::new();
        for piece in stream.chunks(chunk) {
            conn.extend_from_slice(piece);
            while let Some(req) = p.parse(&conn, &limits).unwrap() {
                got.push(args_of(&req, &conn));
                conn.drain(..req.consumed);
            }
        }
        prop_assert!(conn.is_empty());
        prop_assert_eq!(got, cmds);
    }

    #[test]
    fn inline_args_roundtrip(words in prop::collection::vec("[a-zA-Z0-9]{1,8}", 0..6)) {
        let line = format!("{}\r\n", words.join(" "));
        let limits = Limits::default();
        let req = RequestParser::new().parse(line.as_bytes(), &limits).unwrap().unwrap();
        let want: Vec<Vec<u8>> = words.iter().map(|w| w.as_bytes().to_vec()).collect();
        prop_assert_eq!(req.args, RequestArgs::Inline(want));
        prop_assert_eq!(req.consumed, line.len());
    }

    #[test]
    fn frames_roundtrip_at_every_split(frame in frame_strategy()) {
        let buf = frame.to_bytes();
        let limits = Limits::default();
        let (parsed, consumed) = parse_frame(&buf, &limits).unwrap().unwrap();
        prop_assert_eq!(&parsed, &frame);
        prop_assert_eq!(consumed, buf.len());
        for cut in 0..buf.len() {
            prop_assert_eq!(parse_frame(&buf[..cut], &limits), Ok(None), "cut {}", cut);
        }
        // Trailing bytes belong to the next frame.
        let mut two = buf.clone();
        two.extend_from_slice(&buf);
        let (again, n) = parse_frame(&two, &limits).unwrap().unwrap();
        prop_assert_eq!(again, frame);
        prop_assert_eq!(n, buf.len());
    }

    #[test]
    fn g17_roundtrips(x in any::<f64>().prop_filter("finite", |x| x.is_finite())) {
        let text = format_g17(x);
        let back: f64 = text.parse().unwrap();
        prop_assert_eq!(back.to_bits(), x.to_bits(), "{}", text);
    }

    #[test]
    fn g17_agrees_with_shortest_form(x in any::<f64>().prop_filter("finite", |x| x.is_finite())) {
        // %.17g shows at least as many significant digits as the shortest round-trip form.
        let text = format_g17(x);
        let digits = |s: &str| {
            let mant = s.split('e').next().unwrap();
            mant.trim_start_matches('-').replace('.', "").trim_start_matches('0').len()
        };
        prop_assert!(digits(&text) <= 17);
        prop_assert!(x == 0.0 || digits(&text) >= digits(&format!("{x:e}")), "{} vs {:e}", text, x);
    }
}

fn line_text() -> impl Strategy<Value = String> {
    "[^\r\n]{0,12}"
}

fn leaf() -> impl Strategy<Value = Frame> {
    prop_oneof![
        line_text().prop_map(Frame::Simple),
        line_text().prop_map(Frame::Error),
        any::<i64>().prop_map(Frame::Integer),
        prop::collection::vec(any::<u8>(), 0..24).prop_map(Frame::Bulk),
        Just(Frame::Null),
        prop_oneof![
            any::<f64>().prop_filter("no NaN", |d| !d.is_nan()),
            Just(f64::INFINITY),
            Just(f64::NEG_INFINITY),
            Just(0.1),
        ]
        .prop_map(Frame::Double),
        any::<bool>().prop_map(Frame::Boolean),
        "-?[1-9][0-9]{0,40}|0".prop_map(Frame::BigNumber),
        ("[a-z]{3}", prop::collection::vec(any::<u8>(), 0..24))
            .prop_map(|(format, text)| Frame::Verbatim { format, text }),
        prop::collection::vec(any::<u8>(), 0..24).prop_map(Frame::BlobError),
    ]
}

fn frame_strategy() -> impl Strategy<Value = Frame> {
    leaf().prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Frame::Array),
            prop::collection::vec((inner.clone(), inner.clone()), 0..4).prop_map(Frame::Map),
            prop::collection::vec(inner.clone(), 0..6).prop_map(Frame::Set),
            prop::collection::vec(inner, 0..6).prop_map(Frame::Push),
        ]
    })
}
