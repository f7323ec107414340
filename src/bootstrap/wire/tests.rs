//! Parser tests against malformed and hostile input.

use super::*;
use proptest::prelude::*;

#[test]
fn parses_hydra_replies() {
    let m = parse(b"cmd=get_result rc=0 msg=success value=a=b\n").unwrap();
    assert_eq!(m.cmd(), "get_result");
    assert_eq!(m.get("value"), Some("a=b"));
    assert!(m.check_rc().is_ok());
    let m = parse(b"cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=1024").unwrap();
    assert_eq!(m.require_usize("vallen_max"), Ok(1024));
    let m = parse(b"cmd=get_result rc=0 msg=success value=\n").unwrap();
    assert_eq!(m.get("value"), Some(""));
    let m = parse(b"cmd=barrier_out\n").unwrap();
    assert_eq!(m.cmd(), "barrier_out");
}

#[test]
fn reports_failed_rc_with_msg() {
    let m = parse(b"cmd=get_result rc=-1 msg=key_x_not_found value=unknown").unwrap();
    let e = m.check_rc().unwrap_err();
    assert!(e.contains("rc=-1") && e.contains("key_x_not_found"), "{e}");
}

#[test]
fn missing_fields_are_named() {
    let m = parse(b"cmd=maxes kvsname_max=256\n").unwrap();
    let e = m.require_usize("keylen_max").unwrap_err();
    assert!(e.contains("keylen_max"), "{e}");
    let m = parse(b"cmd=maxes keylen_max=-3\n").unwrap();
    assert!(m
        .require_usize("keylen_max")
        .unwrap_err()
        .contains("keylen_max"));
    let m = parse(b"cmd=maxes keylen_max=99999999999999999999999\n").unwrap();
    assert!(m.require_usize("keylen_max").is_err());
    let m = parse(b"cmd=maxes keylen_max=+3\n").unwrap();
    assert!(m.require_usize("keylen_max").is_err());
}

#[test]
fn rejects_malformed_lines() {
    for bad in [
        &b""[..],
        b"\n",
        b"   \n",
        b"get kvsname=x\n",
        b"cmd=\n",
        b"cmdx=put\n",
        b"=put\n",
        b"cmd=put key\n",
        b"cmd=put =v\n",
        b"cmd=put key=a key=b\n",
        b"cmd=put cmd=get\n",
        b"cmd=put key=a\tb\n",
        b"cmd=put key=a\rb\n",
        b"cmd=put key=\x00\n",
        b"cmd=put key=\xff\xfe\n",
        "cmd=put key=é\n".as_bytes(),
        b"cmd=put key=a\nb\n",
    ] {
        assert!(
            parse(bad).is_err(),
            "accepted {:?}",
            String::from_utf8_lossy(bad)
        );
    }
}

#[test]
fn rejects_oversize_lines() {
    let mut line = b"cmd=put value=".to_vec();
    line.resize(MAX_LINE + 10, b'v');
    assert!(parse(&line).unwrap_err().contains("exceeds"));
}

#[test]
fn read_line_bounds_and_eof() {
    let mut r = io::Cursor::new(b"cmd=a\ncmd=b".to_vec());
    assert_eq!(read_line(&mut r).unwrap().unwrap(), b"cmd=a\n");
    assert!(
        read_line(&mut r).is_err(),
        "partial last line must be an error"
    );
    let mut r = io::Cursor::new(Vec::new());
    assert!(read_line(&mut r).unwrap().is_none());
    let mut r = io::Cursor::new(vec![b'x'; MAX_LINE * 3]);
    assert!(read_line(&mut r).is_err());
}

#[test]
fn validates_keys_and_values() {
    assert!(validate_key("addr-3", 64).is_ok());
    assert!(validate_key("", 64).unwrap_err().contains("empty"));
    assert!(validate_key(&"k".repeat(63), 64).is_ok());
    let e = validate_key(&"k".repeat(64), 64).unwrap_err();
    assert!(e.contains("limit is 63"), "{e}");
    assert!(validate_key("a b", 64).is_err());
    assert!(validate_key("a=b", 64).is_err());
    assert!(validate_key("a\nb", 64).is_err());
    assert!(validate_key("ключ", 64).is_err());
    assert!(validate_value("", 1024).is_ok());
    assert!(validate_value(&"v".repeat(1023), 1024).is_ok());
    assert!(validate_value(&"v".repeat(1024), 1024).is_err());
    assert!(validate_value(&"v".repeat(100), 50).is_err());
}

#[test]
fn encode_cannot_inject_lines() {
    let l = encode("put", &[("key", "a\ncmd=abort"), ("value", "x y")]);
    assert_eq!(l, "cmd=put key=a_cmd=abort value=x_y\n");
    assert_eq!(l.matches('\n').count(), 1);
}

proptest! {
    #[test]
    fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        let _ = parse(&bytes);
    }

    #[test]
    fn parse_never_panics_near_valid(s in "cmd=[a-z_]{0,8}( [a-z=]{0,6}=[ -~]{0,12}){0,6}\n?") {
        if let Ok(m) = parse(s.as_bytes()) {
            let _ = m.require_usize("rc");
            let _ = m.check_rc();
        }
    }

    #[test]
    fn encode_parse_roundtrip(
        cmd in "[a-z_]{1,12}",
        fields in proptest::collection::btree_map("[a-z_]{1,10}", "[!-<>-~]{0,40}", 0..6),
    ) {
        let fields: Vec<(&str, &str)> = fields
            .iter()
            .filter(|(k, _)| k.as_str() != "cmd")
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let m = parse(encode(&cmd, &fields).as_bytes()).unwrap();
        prop_assert_eq!(m.cmd(), cmd.as_str());
        for (k, v) in fields {
            prop_assert_eq!(m.get(k), Some(v));
        }
    }

    #[test]
    fn validated_values_survive_the_wire(v in "[!-<>-~]{0,1023}") {
        prop_assert!(validate_value(&v, 1024).is_ok());
        let m = parse(encode("get_result", &[("rc", "0"), ("value", &v)]).as_bytes()).unwrap();
        prop_assert_eq!(m.get("value"), Some(v.as_str()));
    }
}
