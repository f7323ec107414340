//! The PMI-2 client against a scripted server on a socket pair (good and
//! hostile answers), and the frame decoder against arbitrary input.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::thread::JoinHandle;

use proptest::prelude::*;

use super::*;

/// A framed answer.
fn f(body: &str) -> Vec<u8> {
    let mut out = format!("{:<6}", body.len()).into_bytes();
    out.extend_from_slice(body.as_bytes());
    out
}

fn good() -> Vec<Vec<u8>> {
    vec![
        b"cmd=response_to_init pmi_version=2 pmi_subversion=0 rc=0\n".to_vec(),
        f("cmd=fullinit-response;rc=0;pmi-version=2;pmi-subversion=0;rank=2;size=4;appnum=-1;debugged=FALSE;pmiverbose=FALSE;"),
        f("cmd=job-getid-response;rc=0;jobid=7.0;"),
    ]
}

/// Reads the PMI-1 init line, then framed requests; answers each with the
/// next scripted answer; returns the requests seen.
fn server(answers: Vec<Vec<u8>>) -> (UnixStream, JoinHandle<Vec<String>>) {
    let (ours, theirs) = UnixStream::pair().unwrap();
    let h = std::thread::spawn(move || {
        let mut w = theirs.try_clone().unwrap();
        let mut r = BufReader::new(theirs);
        let mut seen = Vec::new();
        for (i, a) in answers.into_iter().enumerate() {
            if i == 0 {
                let mut l = String::new();
                if r.read_line(&mut l).unwrap_or(0) == 0 {
                    break;
                }
                seen.push(l.trim_end().to_string());
            } else {
                let mut h = [0u8; 6];
                if r.read_exact(&mut h).is_err() {
                    break;
                }
                let n: usize = std::str::from_utf8(&h).unwrap().trim().parse().unwrap();
                let mut b = vec![0; n];
                r.read_exact(&mut b).unwrap();
                seen.push(String::from_utf8(b).unwrap());
            }
            if w.write_all(&a).is_err() {
                break;
            }
        }
        seen
    });
    (ours, h)
}

fn join_with(answers: Vec<Vec<u8>>) -> (Result<Pmi2>, JoinHandle<Vec<String>>) {
    let (s, h) = server(answers);
    (Pmi2::join(Conn::Unix(s), 2, Some(4), Some("7.0")), h)
}

#[test]
fn good_conversation() {
    let mut answers = good();
    answers.push(f("cmd=kvs-put-response;rc=0;"));
    answers.push(f("cmd=kvs-fence-response;rc=0;"));
    answers.push(f("cmd=kvs-get-response;rc=0;found=TRUE;value=ab.12.ff;"));
    answers.push(f("cmd=kvs-get-response;rc=0;found=FALSE;"));
    answers.push(f(
        "cmd=info-getjobattr-response;rc=0;found=TRUE;value=(vector,(0,1,4));",
    ));
    answers.push(f("cmd=finalize-response;rc=0;"));
    let (p, h) = join_with(answers);
    let p = p.unwrap();
    assert_eq!((p.rank(), p.size(), p.name()), (2, 4, "pmi2"));
    p.put("os-2", "ab.12.ff").unwrap();
    p.barrier().unwrap();
    assert_eq!(p.get("os-1").unwrap(), "ab.12.ff");
    let e = p.get("os-3").unwrap_err().to_string();
    assert!(e.contains("os-3") && e.contains("not found"), "{e}");
    assert_eq!(p.get(MAPPING_KEY).unwrap(), "(vector,(0,1,4))");
    let s = p.stats();
    assert_eq!((s.puts, s.fences, s.gets, s.queries), (1, 1, 2, 1), "{s:?}");
    assert_eq!(s.put_bytes, ("os-2".len() + "ab.12.ff".len()) as u64);
    assert_eq!(
        s.get_bytes,
        ("ab.12.ff".len() + "(vector,(0,1,4))".len()) as u64
    );
    p.finalize().unwrap();
    assert!(p.get("os-1").is_err(), "usable after finalize");
    let seen = h.join().unwrap();
    assert_eq!(seen[0], "cmd=init pmi_version=2 pmi_subversion=0");
    assert_eq!(
        seen[1],
        "cmd=fullinit;pmijobid=7.0;pmirank=2;threaded=TRUE;"
    );
    assert_eq!(seen[2], "cmd=job-getid;");
    assert_eq!(seen[3], "cmd=kvs-put;key=os-2;value=ab.12.ff;");
    assert_eq!(seen[4], "cmd=kvs-fence;");
    assert_eq!(seen[5], "cmd=kvs-get;jobid=7.0;srcid=-1;key=os-1;");
    assert_eq!(seen[7], "cmd=info-getjobattr;key=PMI_process_mapping;");
    assert_eq!(seen[8], "cmd=finalize;");
}

/// Each hostile answer at each step: an error naming the problem.
#[test]
fn hostile_handshakes() {
    let cases: Vec<(usize, Vec<u8>, &str)> = vec![
        (
            0,
            b"cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0\n".to_vec(),
            "pmi_version=1",
        ),
        (
            0,
            b"cmd=response_to_init pmi_version=2 rc=-1 msg=no\n".to_vec(),
            "refused",
        ),
        (0, b"garbage\n".to_vec(), "cmd="),
        (0, b"".to_vec(), "closed"),
        (
            1,
            f("cmd=fullinit-response;rc=0;pmi-version=2;rank=3;size=4;"),
            "rank 3 of 4",
        ),
        (
            1,
            f("cmd=fullinit-response;rc=0;pmi-version=2;rank=2;size=5;"),
            "rank 2 of 5",
        ),
        (
            1,
            f("cmd=fullinit-response;rc=0;pmi-version=2;rank=9;size=4;"),
            "not in 0..4",
        ),
        (
            1,
            f("cmd=fullinit-response;rc=0;pmi-version=2;rank=2;"),
            "size",
        ),
        (
            1,
            f("cmd=fullinit-response;rc=0;pmi-version=2;rank=-2;size=4;"),
            "rank",
        ),
        (1, f("cmd=fullinit-response;rc=3;errmsg=bad job;"), "rc=3"),
        (1, f("cmd=fullinit-response;rc=0;rc=0;"), "repeated"),
        (1, b"999999".to_vec(), "exceeds"),
        (1, b"abcdef".to_vec(), "decimal"),
        (1, b"10    cmd=".to_vec(), "inside"),
        (
            1,
            f("cmd=kvs-put-response;rc=0;"),
            "expected cmd=fullinit-response",
        ),
        (
            1,
            f("cmd=fullinit-response;rc=0;pmi-version=2;rank=2;size=4;x=\u{1};"),
            "0x01",
        ),
        (2, f("cmd=job-getid-response;rc=0;"), "jobid"),
        (2, f("cmd=job-getid-response;rc=0;jobid=;"), "jobid"),
    ];
    for (step, bad, want) in cases {
        let mut answers = good();
        answers.truncate(step);
        answers.push(bad.clone());
        let (p, h) = join_with(answers);
        let e = p
            .expect_err(&format!("accepted {:?}", String::from_utf8_lossy(&bad)))
            .to_string();
        assert!(e.contains(want), "{:?}: {e}", String::from_utf8_lossy(&bad));
        drop(h);
    }
}

#[test]
fn hostile_answers_close_the_connection() {
    for bad in [
        f("cmd=kvs-get-response;rc=0;found=maybe;"),
        f("cmd=kvs-get-response;rc=0;found=TRUE;"),
        f(&format!(
            "cmd=kvs-get-response;rc=0;found=TRUE;value={};",
            "x".repeat(2000)
        )),
        f("cmd=kvs-get-response;found=TRUE;value=1;"),
        f("cmd=kvs-put-response;rc=0;"),
    ] {
        let mut answers = good();
        answers.push(bad.clone());
        let (p, h) = join_with(answers);
        let p = p.unwrap();
        let e = p.get("os-1").unwrap_err();
        assert!(matches!(e, Error::Protocol { .. }), "{e}");
        let e = p.get("os-1").unwrap_err().to_string();
        assert!(e.contains("connection closed"), "{e}");
        drop(p);
        h.join().unwrap();
    }
}

#[test]
fn failed_rc_keeps_the_connection() {
    let mut answers = good();
    answers.push(f("cmd=kvs-put-response;rc=1;errmsg=duplicate key;"));
    answers.push(f("cmd=kvs-put-response;rc=0;"));
    let (p, h) = join_with(answers);
    let p = p.unwrap();
    let e = p.put("os-2", "v").unwrap_err().to_string();
    assert!(e.contains("duplicate key") && e.contains("os-2"), "{e}");
    p.put("os-2", "w").unwrap();
    assert_eq!(p.stats().puts, 1);
    drop(p);
    h.join().unwrap();
}

#[test]
fn rejects_bad_keys_and_values_locally() {
    let (p, h) = join_with(good());
    let p = p.unwrap();
    assert!(p.put("a;b", "v").is_err());
    assert!(p.put("k", "v;w").is_err());
    assert!(p.put("k k", "v").is_err());
    assert!(p.get("a;b").is_err());
    assert!(p.put("k", &"v".repeat(MAX_VALUE_LEN + 1)).is_err());
    drop(p);
    h.join().unwrap();
}

#[test]
fn frame_round_trip_and_escapes() {
    let m = frame::encode("kvs-put", &[("key", "a;b"), ("value", "x=y ;;")]).unwrap();
    let body = &m[frame::HEADER..];
    assert_eq!(&m[..frame::HEADER], format!("{:<6}", body.len()).as_bytes());
    let p = frame::parse(body).unwrap();
    assert_eq!(p.cmd(), "kvs-put");
    assert_eq!(p.get("key"), Some("a;b"));
    assert_eq!(p.get("value"), Some("x=y ;;"));
    // No trailing ';' and leading spaces in the header are accepted.
    assert_eq!(frame::parse(b"cmd=a;b=1").unwrap().get("b"), Some("1"));
    assert_eq!(frame::parse_header(b"    12").unwrap(), 12);
    for bad in [
        &b""[..],
        b";",
        b"=x;",
        b"cmd=;",
        b"b=1;cmd=a;",
        b"cmd=a;b",
        b"cmd=a;=1;",
    ] {
        assert!(
            frame::parse(bad).is_err(),
            "accepted {:?}",
            String::from_utf8_lossy(bad)
        );
    }
    assert!(frame::encode("x", &[("v", &"y".repeat(frame::MAX_BODY))]).is_err());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Arbitrary bytes never panic the decoder; whatever it accepts is
    /// printable and re-encodes to a message that parses to the same thing.
    #[test]
    fn decoder_total_on_arbitrary_bytes(body in proptest::collection::vec(any::<u8>(), 0..300)) {
        if let Ok(m) = frame::parse(&body) {
            let fields: Vec<(String, String)> = ["rc", "key", "value", "found", "jobid"]
                .iter()
                .filter_map(|n| m.get(n).map(|v| (n.to_string(), v.to_string())))
                .collect();
            let refs: Vec<(&str, &str)> = fields.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
            let again = frame::encode(m.cmd(), &refs).unwrap();
            let m2 = frame::parse(&again[frame::HEADER..]).unwrap();
            prop_assert_eq!(m2.cmd(), m.cmd());
            for (n, v) in &fields {
                prop_assert_eq!(m2.get(n), Some(v.as_str()));
            }
        }
    }

    /// Near-valid bodies (the protocol's own alphabet) never panic either.
    #[test]
    fn decoder_total_on_protocol_alphabet(body in "[a-z=;;0-9 -]{0,80}") {
        let _ = frame::parse(body.as_bytes());
    }

    /// Arbitrary streams: the framed reader never panics, never reads past
    /// its header's length, and rejects over-long or malformed headers.
    #[test]
    fn reader_total_on_arbitrary_streams(stream in proptest::collection::vec(any::<u8>(), 0..64)) {
        let mut r = &stream[..];
        if let Ok(Some(body)) = frame::read_body(&mut r) {
            prop_assert!(body.len() <= frame::MAX_BODY);
            prop_assert_eq!(frame::HEADER + body.len() + r.len(), stream.len());
        }
    }

    /// encode then parse is the identity for printable fields.
    #[test]
    fn round_trip(cmd in "[a-z][a-z-]{0,20}", k in "k[a-z]{0,9}", v in "[ -~]{0,200}") {
        let m = frame::encode(&cmd, &[(&k, &v)]).unwrap();
        let mut r = &m[..];
        let body = frame::read_body(&mut r).unwrap().unwrap();
        let p = frame::parse(&body).unwrap();
        prop_assert_eq!(p.cmd(), cmd.as_str());
        prop_assert_eq!(p.get(&k), Some(v.as_str()));
    }
}

/// `abort` sends MPICH's `cmd=abort;isworld=TRUE;msg=...;` (Slurm kills the
/// step) and awaits no answer.
#[test]
fn abort_asks_for_the_whole_job() {
    let mut answers = good();
    answers.push(Vec::new());
    let (p, h) = join_with(answers);
    let p = p.unwrap();
    p.abort(3, "rank 2 aborts; exit code 3");
    drop(p);
    let seen = h.join().unwrap();
    assert_eq!(
        seen[3],
        "cmd=abort;isworld=TRUE;msg=rank 2 aborts;; exit code 3;"
    );
}
