//! Strings on the wire byte for byte as Apache ZooKeeper's Java code makes
//! them (`proto::java_utf8`), checked against the JVM itself: 100,000 byte
//! strings, most of them not UTF-8 (lone continuation bytes, overlong
//! forms, CESU-8 surrogates, sequences cut short, bytes above F4), each read
//! by `new String(bytes, UTF_8)` (jute's readString) and written back by
//! jute's `BinaryOutputArchive.writeString`, in Debian's JDK with
//! ZooKeeper 3.8's jute jar, and by ringkeeper's reader and writer; the two
//! must agree on every one. What a member writes must also read back as
//! itself (`Reader::of_member`).
//!
//! Needs: apt-get install -y default-jdk-headless zookeeper

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use ringkeeper::proto::java_utf8;
use ringkeeper::proto::jute::{Reader, Writer};

mod common;
use common::bounded::run_bounded;

const CLASSPATH_JARS: [&str; 2] = [
    "/usr/share/java/zookeeper-jute.jar",
    "/usr/share/java/zookeeper.jar",
];
const CASES: usize = 100_000;

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Byte strings of 1-9 bytes drawn mostly from the bytes where UTF-8's
/// rules turn (a fixed xorshift, so every run checks the same ones), and
/// the CESU-8 forms of a few characters outside the BMP.
fn cases() -> Vec<Vec<u8>> {
    const TURNS: [u8; 30] = [
        0x00, 0x41, 0x7f, 0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xb8, 0xbd, 0xbf, 0xc0, 0xc1, 0xc2, 0xc3,
        0xdf, 0xe0, 0xe1, 0xed, 0xee, 0xef, 0xf0, 0xf1, 0xf3, 0xf4, 0xf5, 0xf7, 0xf8, 0xfe, 0xff,
    ];
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut all = vec![
        b"\xed\xa0\xbd\xed\xb8\x80".to_vec(),
        b"\xed\xb8\x80\xed\xa0\xbd".to_vec(),
        b"\xed\xa0\xbd\xed\xa0\xbd\xed\xb8\x80".to_vec(),
        b"/a\xed\xa0\xbd".to_vec(),
        "x\u{1f600}y\u{10ffff}\u{10000}".as_bytes().to_vec(),
    ];
    while all.len() < CASES {
        let len = 1 + (next() % 9) as usize;
        let b = (0..len)
            .map(|_| {
                let r = next();
                if r % 100 < 85 {
                    TURNS[(r >> 8) as usize % TURNS.len()]
                } else {
                    (r >> 16) as u8
                }
            })
            .collect();
        all.push(b);
    }
    all
}

#[test]
fn strings_read_and_written_as_zookeeper_does() {
    let work = tempfile::tempdir().unwrap();
    for jar in CLASSPATH_JARS {
        assert!(
            Path::new(jar).exists(),
            "{jar} is missing: apt-get install -y zookeeper"
        );
    }
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/java_strings/JuteStrings.java");
    let classpath = CLASSPATH_JARS.join(":");
    let mut javac = Command::new("javac");
    javac
        .args(["-cp", &classpath, "-d"])
        .arg(work.path())
        .arg(&source);
    let built = run_bounded(
        javac,
        Stdio::null(),
        work.path(),
        "javac",
        Duration::from_secs(120),
    );
    assert!(
        built.success(),
        "javac failed (apt-get install -y default-jdk-headless):\n{}{}",
        built.out,
        built.err
    );

    let cases = cases();
    let input = work.path().join("cases.hex");
    let mut text = String::new();
    for c in &cases {
        text.push_str(&hex(c));
        text.push('\n');
    }
    std::fs::write(&input, text).unwrap();
    let mut java = Command::new("java");
    java.arg("-cp")
        .arg(format!("{classpath}:{}", work.path().display()))
        .arg("JuteStrings");
    let ran = run_bounded(
        java,
        Stdio::from(std::fs::File::open(&input).unwrap()),
        work.path(),
        "java",
        Duration::from_secs(120),
    );
    assert!(ran.success(), "java failed:\n{}", ran.err);
    let lines: Vec<&str> = ran.out.lines().collect();
    assert_eq!(lines.len(), cases.len(), "one line per case from java");

    let mut differ = Vec::new();
    for (bytes, java) in cases.iter().zip(&lines) {
        let mut framed = Vec::new();
        Writer::new(&mut framed).buffer(bytes);
        let read = Reader::new(&framed).read_string().unwrap();
        let mut written = Vec::new();
        Writer::new(&mut written).string(&read);
        let ours = format!("{} {}", hex(read.as_bytes()), hex(&written[4..]));
        if ours != *java {
            differ.push(format!("{}: java {java}, ringkeeper {ours}", hex(bytes)));
        }
        assert_eq!(
            i32::from_be_bytes(written[..4].try_into().unwrap()) as usize,
            written.len() - 4,
            "the length prefix of {}",
            hex(bytes)
        );
        // What a member wrote reads back as what it held.
        assert_eq!(
            Reader::of_member(&written).read_string().unwrap(),
            read,
            "a member's string {}",
            hex(&written)
        );
        assert_eq!(java_utf8::decode(bytes), read);
    }
    assert!(
        differ.is_empty(),
        "{} of {} strings differ from Java's, e.g.:\n{}",
        differ.len(),
        cases.len(),
        differ[..differ.len().min(20)].join("\n")
    );
}
