//! The client against a scripted server on the other end of a socket pair:
//! good and hostile answers. Every hostile answer must give an error naming
//! the problem, never a panic or a hang.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::thread::JoinHandle;

use super::*;

const GOOD: &[&[u8]] = &[
    b"cmd=initack rc=0\ncmd=set size=4\ncmd=set rank=2\ncmd=set debug=0\n",
    b"cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0\n",
    b"cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=1024\n",
    b"cmd=my_kvsname kvsname=kvs_1\n",
];

/// Answers each request line with the next scripted answer, then closes.
fn server(answers: Vec<Vec<u8>>) -> (UnixStream, JoinHandle<Vec<String>>) {
    let (ours, theirs) = UnixStream::pair().unwrap();
    let h = std::thread::spawn(move || {
        let mut w = theirs.try_clone().unwrap();
        let mut r = BufReader::new(theirs);
        let mut seen = Vec::new();
        for a in answers {
            let mut l = String::new();
            if r.read_line(&mut l).unwrap_or(0) == 0 {
                break;
            }
            seen.push(l.trim_end().to_string());
            if w.write_all(&a).is_err() {
                break;
            }
        }
        seen
    });
    (ours, h)
}

fn join_with(answers: Vec<Vec<u8>>) -> (Result<Pmi1>, JoinHandle<Vec<String>>) {
    let (s, h) = server(answers);
    let ack = InitAck {
        id: 2,
        token: Some("abc"),
    };
    (Pmi1::join(Conn::Unix(s), "test", Some(ack), None), h)
}

fn good() -> Vec<Vec<u8>> {
    GOOD.iter().map(|a| a.to_vec()).collect()
}

#[test]
fn good_conversation() {
    let mut answers = good();
    answers.push(b"cmd=put_result rc=0 msg=success\n".to_vec());
    answers.push(b"cmd=barrier_out\n".to_vec());
    answers.push(b"cmd=get_result rc=0 msg=success value=v=1\n".to_vec());
    answers.push(b"cmd=get_result rc=-1 msg=key_x_not_found value=unknown\n".to_vec());
    answers.push(b"cmd=finalize_ack\n".to_vec());
    let (p, h) = join_with(answers);
    let p = p.unwrap();
    assert_eq!((p.rank(), p.size()), (2, 4));
    p.put("k", "v").unwrap();
    p.barrier().unwrap();
    assert_eq!(p.get("k").unwrap(), "v=1");
    assert!(p
        .get("x")
        .unwrap_err()
        .to_string()
        .contains("key_x_not_found"));
    drop(p);
    let seen = h.join().unwrap();
    assert_eq!(seen[0], "cmd=initack pmiid=2 token=abc");
    assert_eq!(seen[4], "cmd=put kvsname=kvs_1 key=k value=v");
    assert_eq!(seen.last().unwrap(), "cmd=finalize");
}

/// Replaces answer `i` of the good handshake and expects an error with `needle`.
fn hostile(i: usize, answer: &[u8], needle: &str) {
    let mut answers = good();
    answers[i] = answer.to_vec();
    let (p, h) = join_with(answers);
    let e = p.expect_err("hostile answer accepted").to_string();
    assert!(
        e.contains(needle),
        "answer {:?}: error {e:?} lacks {needle:?}",
        String::from_utf8_lossy(answer)
    );
    let _ = h.join();
}

#[test]
fn hostile_handshakes() {
    hostile(
        0,
        b"cmd=initack rc=-1 msg=wrong_job_token\n",
        "wrong_job_token",
    );
    hostile(
        0,
        b"cmd=initack\ncmd=set size=4\ncmd=set debug=0\ncmd=set debug=0\n",
        "'rank'",
    );
    hostile(0, b"cmd=initack\ncmd=set size=x\n", "'size'");
    hostile(
        0,
        b"cmd=initack\ncmd=set size=4\ncmd=set rank=9\ncmd=set debug=0\n",
        "rank 9",
    );
    hostile(
        0,
        b"cmd=initack\ncmd=set size=0\ncmd=set rank=0\ncmd=set debug=0\n",
        "rank 0",
    );
    hostile(0, b"cmd=initack\ncmd=set hostname=x\n", "none of size");
    hostile(
        1,
        b"cmd=response_to_init pmi_version=2 pmi_subversion=0 rc=0\n",
        "pmi_version=2",
    );
    hostile(1, b"cmd=response_to_init rc=0\n", "'pmi_version'");
    hostile(
        1,
        b"cmd=response_to_init pmi_version=1 rc=-1 msg=no\n",
        "rc=-1",
    );
    hostile(
        2,
        b"cmd=maxes kvsname_max=256 vallen_max=1024\n",
        "'keylen_max'",
    );
    hostile(
        2,
        b"cmd=maxes kvsname_max=256 keylen_max=1 vallen_max=1024\n",
        "'keylen_max'",
    );
    hostile(
        2,
        b"cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=-1\n",
        "'vallen_max'",
    );
    hostile(2, b"cmd=barrier_out\n", "expected cmd=maxes");
    hostile(3, b"cmd=my_kvsname\n", "'kvsname'");
    hostile(3, b"cmd=my_kvsname kvsname=\n", "'kvsname'");
    hostile(3, b"cmd=my_kvsname kvsname=\xff\xfe\n", "0xff");
    hostile(3, b"cmd=my_kvsname kvsname=a\x00b\n", "0x00");
    hostile(3, b"cmd=my_kvsname kvsname=abc", "middle of a line");
    hostile(3, b"", "closed the connection");
    hostile(3, &[b'x'; 9000], "longer than");
}

#[test]
fn hostile_answers_break_the_connection() {
    for (answer, needle) in [
        (&b"cmd=get_result rc=0 msg=success\n"[..], "'value'"),
        (b"cmd=get_result value=v\n", "'rc'"),
        (b"cmd=put_result rc=0\n", "expected cmd=get_result"),
        (b"cmd=get_result rc=0 value=a value=b\n", "repeated"),
    ] {
        let mut answers = good();
        answers.push(answer.to_vec());
        let (p, h) = join_with(answers);
        let p = p.unwrap();
        let e = p.get("k").unwrap_err().to_string();
        assert!(e.contains(needle), "{e:?} lacks {needle:?}");
        let e = p.barrier().unwrap_err().to_string();
        assert!(e.contains("connection closed"), "{e}");
        drop(p);
        let _ = h.join();
    }
}

#[test]
fn put_validates_before_sending() {
    let (p, h) = join_with(good());
    let p = p.unwrap();
    for (k, v) in [
        ("", "v"),
        ("a b", "v"),
        ("a=b", "v"),
        ("k", "x y"),
        ("k", "ü"),
    ] {
        assert!(p.put(k, v).is_err(), "{k:?}={v:?} accepted");
    }
    let e = p.put(&"k".repeat(64), "v").unwrap_err().to_string();
    assert!(e.contains("limit is 63"), "{e}");
    let e = p.put("k", &"v".repeat(1024)).unwrap_err().to_string();
    assert!(e.contains("limit is 1023"), "{e}");
    drop(p);
    assert_eq!(
        h.join().unwrap().len(),
        4,
        "invalid puts reached the server"
    );
}

/// `abort` sends MPICH's `cmd=abort exitcode=<n>` and awaits no answer (the
/// server ends the job instead).
#[test]
fn abort_sends_the_exit_code() {
    let mut answers = good();
    // Read the abort line; the "answer" is never read by the client.
    answers.push(Vec::new());
    let (p, h) = join_with(answers);
    let p = p.unwrap();
    p.abort(-3, "rank 2 aborts");
    drop(p);
    let seen = h.join().unwrap();
    assert_eq!(seen[4], "cmd=abort exitcode=-3");
}
